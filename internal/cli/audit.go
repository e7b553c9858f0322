package cli

import (
	"context"
	"fmt"
	"strconv"

	"kndl.dev/kndl/internal/apiclient"
)

// auditList is kndl audit: the Hub's audit log, newest first (the Owner
// alone reads it).
func auditList(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "audit")
	asJSON := fs.Bool("json", false, "print JSON")
	before := fs.Int64("before", 0, "list the entries numbered below this one")
	limit := fs.Int("limit", 50, "list at most this many (up to 1000)")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	es, err := c.Audit(ctx, *before, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, es)
	}
	var rows [][]string
	for _, e := range es {
		who := e.Actor
		if who == "" {
			who = "-"
		}
		rows = append(rows, []string{strconv.FormatInt(e.Seq, 10), e.At.Local().Format("2006-01-02 15:04:05"), who + " (" + e.Via + ")",
			e.Addr, e.Action, e.Target, e.Detail})
	}
	return table(io, "SEQ\tWHEN\tWHO\tFROM\tWHAT\tTO\tDETAIL", rows)
}

// auditVerify is kndl audit verify: the Hub walks the audit log's hash
// chain and says where it first breaks. A broken chain is an error, so a
// script can tell.
func auditVerify(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "audit verify")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	chain, err := c.VerifyAudit(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := printJSON(io, chain); err != nil {
			return err
		}
	}
	if chain.BrokenAt != 0 {
		return fmt.Errorf("the audit log's chain breaks at entry %d: %s", chain.BrokenAt, chain.Reason)
	}
	if !*asJSON {
		fmt.Fprintf(io.Stdout, "The audit log's chain holds: %d entries; the newest is %d, with hash %s.\n"+
			"Keep that number and hash elsewhere: a log cut short since shows an older one.\n", chain.Entries, chain.HeadSeq, chain.HeadHash)
	}
	return nil
}
