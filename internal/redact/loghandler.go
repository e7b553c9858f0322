package redact

import (
	"context"
	"log/slog"
)

// LogHandler wraps an operator log's handler so that every message and
// attribute passes through Scrub: a backstop for a credential nobody told
// kndl about turning up in an error it logs.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ next slog.Handler }

func (l logHandler) Enabled(ctx context.Context, lvl slog.Level) bool {
	return l.next.Enabled(ctx, lvl)
}

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, Scrub(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(scrubAttr(a))
		return true
	})
	return l.next.Handle(ctx, out)
}

func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	scrubbed := make([]slog.Attr, len(as))
	for i, a := range as {
		scrubbed[i] = scrubAttr(a)
	}
	return logHandler{l.next.WithAttrs(scrubbed)}
}

func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.next.WithGroup(name)} }

func scrubAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, Scrub(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, x := range g {
			out[i] = scrubAttr(x)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, Scrub(err.Error()))
		}
		return slog.String(a.Key, Scrub(v.String()))
	}
	return a
}
