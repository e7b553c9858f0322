package cli

import (
	"context"
	"fmt"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
)

// notifyFlags reads what notify add and notify edit take: the URL last,
// and a format; rest is what came before the URL.
func notifyFlags(io IO, name string, args []string) (req api.NotifyWebhookRequest, rest []string, err error) {
	fs := Flags(io, name)
	format := fs.String("format", "json", "json (kndl's event, signed) or slack (an incoming webhook's {\"text\": ...})")
	pos, err := Parse(fs, args)
	if err != nil {
		return req, nil, err
	}
	if len(pos) == 0 {
		return req, nil, ErrUsage
	}
	return api.NotifyWebhookRequest{URL: pos[len(pos)-1], Format: *format}, pos[:len(pos)-1], nil
}

func notifyAdd(ctx context.Context, io IO, args []string) error {
	req, rest, err := notifyFlags(io, "notify add", args)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	w, err := c.AddWebhook(ctx, req)
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Added webhook %s (%s). Its posts carry X-Kndl-Signature-256: sha256= and the body's HMAC-SHA256 under this secret, shown only this once:\n\n  %s\n",
		w.ID, w.Format, w.Secret)
	return nil
}

func notifyEdit(ctx context.Context, io IO, args []string) error {
	req, rest, err := notifyFlags(io, "notify edit", args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	if _, err := c.EditWebhook(ctx, rest[0], req); err != nil {
		return err
	}
	fmt.Fprintln(io.Stderr, "Changed; its failures are cleared, and a stopped webhook posts again.")
	return nil
}

func notifyList(ctx context.Context, io IO, args []string) error {
	ws, asTable, err := listing(ctx, io, "notify ls", args, (*apiclient.Client).Webhooks)
	if !asTable {
		return err
	}
	var rows [][]string
	for _, w := range ws {
		rows = append(rows, []string{w.ID, w.Format, w.URL, webhookState(w)})
	}
	return table(io, "ID\tFORMAT\tURL\tSTATE", rows)
}

// webhookState says whether a webhook delivers, fails, or was stopped.
func webhookState(w api.NotifyWebhook) string {
	switch {
	case !w.StoppedAt.IsZero():
		return "stopped " + ago(w.StoppedAt) + " after a day of failures (kndl notify edit starts it again): " + w.LastError
	case !w.FailingSince.IsZero():
		return "failing since " + ago(w.FailingSince) + ": " + w.LastError
	}
	return "ok"
}

func notifyRemove(ctx context.Context, io IO, args []string) error {
	if len(args) != 1 {
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	return c.RemoveWebhook(ctx, args[0])
}
