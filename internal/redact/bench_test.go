package redact

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time this process has used. On a shared machine the
// wall-clock MB/s counts time spent waiting for a core; run with -cpu 1,
// cpu-MB/s (bytes per second of CPU time, GC included) is the throughput of
// one core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs body b.N times and reports cpu-MB/s for n bytes each.
func loop(b *testing.B, n int, body func()) {
	b.SetBytes(int64(n))
	start := cpuTime()
	for b.Loop() {
		body()
	}
	if used := cpuTime() - start; used > 0 {
		b.ReportMetric(float64(n)*float64(b.N)/used.Seconds()/1e6, "cpu-MB/s")
	}
}

// benchValues are 50 values as a Session's set holds them: tokens of
// several shapes, passwords, and one private key.
func benchValues() []string {
	r := rand.New(rand.NewPCG(1, 2))
	const b62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	word := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	var vs []string
	for i := range 16 {
		vs = append(vs, "ghp_"+word(36, b62), "kndl_sbx_"+word(32, b62), word(20+i, b62+"!@#$%^&()-_=+ "))
	}
	var key strings.Builder
	key.WriteString("-----BEGIN OPENSSH PRIVATE KEY-----\n")
	for range 25 {
		key.WriteString(word(70, b62+"+/") + "\n")
	}
	key.WriteString("-----END OPENSSH PRIVATE KEY-----\n")
	vs = append(vs, key.String(), word(64, "0123456789abcdef"))
	return vs
}

// benchText is terminal output: words, code and numbers in lines of about 80
// characters, a colour code every few words, and one of the values every
// 64 KiB.
func benchText(size int, values []string) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("the a to of and in is it for on func return err nil if := go test build session sandbox " +
		"runner hub token value redact stream terminal output line package import fmt Errorf 200 404 0.86s ok " +
		"PASS FAIL --- === RUN main.go:42 /workspace/internal/redact git commit push origin HEAD 3f2a1b4c")
	colours := []string{"\x1b[1;32m", "\x1b[0m", "\x1b[38;5;244m", "\x1b[31m", "\x1b[2K\r"}
	var b strings.Builder
	line, next := 0, 64<<10
	for b.Len() < size {
		if b.Len() >= next {
			b.WriteString(values[r.IntN(len(values))])
			next += 64 << 10
		}
		w := words[r.IntN(len(words))]
		if r.IntN(6) == 0 {
			b.WriteString(colours[r.IntN(len(colours))])
		}
		b.WriteString(w)
		line += len(w) + 1
		if line > 80 {
			b.WriteString("\r\n")
			line = 0
		} else {
			b.WriteByte(' ')
		}
	}
	return []byte(b.String()[:size])
}

// BenchmarkStream: terminal output in 4 KiB pieces through a Stream with 50
// values; 1 MiB and 16 MiB per op show the cost is linear.
func BenchmarkStream(b *testing.B) {
	values := benchValues()
	s := mustSet(b, values...)
	for _, size := range []int{1 << 20, 16 << 20} {
		text := benchText(size, values)
		b.Run(fmt.Sprintf("values=50/size=%dMiB", size>>20), func(b *testing.B) {
			out := make([]byte, 0, 8<<10)
			b.ReportAllocs()
			loop(b, len(text), func() {
				st := s.NewStream()
				for i := 0; i < len(text); i += 4 << 10 {
					out = st.Redact(out[:0], text[i:min(i+4<<10, len(text))])
				}
				out = st.Flush(out[:0])
			})
		})
	}
}

// BenchmarkStreamPrefixes: the worst case for the automaton, text made of
// the values' own beginnings, so it is always deep in a partial match.
func BenchmarkStreamPrefixes(b *testing.B) {
	values := benchValues()
	s := mustSet(b, values...)
	r := rand.New(rand.NewPCG(5, 6))
	var sb strings.Builder
	for sb.Len() < 1<<20 {
		v := values[r.IntN(len(values))]
		sb.WriteString(v[:r.IntN(len(v)-1)])
		if r.IntN(3) == 0 {
			sb.WriteString("\x1b[0m")
		}
	}
	text := []byte(sb.String())
	out := make([]byte, 0, 8<<10)
	loop(b, len(text), func() {
		st := s.NewStream()
		for i := 0; i < len(text); i += 4 << 10 {
			out = st.Redact(out[:0], text[i:min(i+4<<10, len(text))])
		}
		out = st.Flush(out[:0])
	})
}

// BenchmarkRedact: one whole text at once.
func BenchmarkRedact(b *testing.B) {
	values := benchValues()
	s := mustSet(b, values...)
	text := string(benchText(1<<20, values))
	b.ReportAllocs()
	loop(b, len(text), func() { s.Redact(text) })
}

// BenchmarkAdd: building the automaton for 50 values, which Add and Remove
// do; it also reports the automaton's size.
func BenchmarkAdd(b *testing.B) {
	values := benchValues()
	var m *matcher
	for b.Loop() {
		s := mustSet(b, values...)
		m = s.matcher()
	}
	size := 4*len(m.dense) + 8*len(m.dDepth) + 20*len(m.deep) + 8*len(m.edges)
	b.ReportMetric(float64(size), "automaton-bytes")
	b.ReportMetric(float64(m.npat), "patterns")
}

// BenchmarkScrub: the shape registry over ordinary log text with a
// credential every 64 KiB, and over text dense with near misses of every
// rule (nearMisses).
func BenchmarkScrub(b *testing.B) {
	cred := []string{"ghp_O9hFAiOh29oB93c0F6UJ5YtuALNUEJMUUqAs", "Authorization: Bearer hpODtmtyS9z8iLtoJ22zT4fNH2pdh6uLdVgq", "postgres://app:NVWTBxUPds5tYOodx@db/app"}
	for _, size := range []int{1 << 20, 4 << 20} {
		text := string(benchText(size, cred))
		b.Run(fmt.Sprintf("log/size=%dMiB", size>>20), func(b *testing.B) {
			loop(b, len(text), func() { Scrub(text) })
		})
	}
	for _, size := range []int{1 << 20, 4 << 20} {
		text := nearMisses(size)
		b.Run(fmt.Sprintf("near-misses/size=%dMiB", size>>20), func(b *testing.B) {
			loop(b, len(text), func() { Scrub(text) })
		})
	}
	text := denseSecrets(512 << 10)
	b.Run("dense/size=512KiB", func(b *testing.B) {
		loop(b, len(text), func() { Scrub(text) })
	})
}

// nearMisses is size bytes of what every rule reads and rejects, in lines
// of about 80 bytes: each needed word of each rule, once as a name given a
// value too short, once glued to a few characters of a token, and
// candidates of kndl's own rules that fail late (a placeholder, a
// key header with no key).
func nearMisses(size int) string {
	var unit strings.Builder
	line := 0
	add := func(s string) {
		unit.WriteString(s)
		if line += len(s) + 1; line > 80 {
			unit.WriteByte('\n')
			line = 0
		} else {
			unit.WriteByte(' ')
		}
	}
	for _, d := range Detectors() {
		for _, w := range d.need {
			add(w + ` = "q7Zk"`)
			add(w + "Q7zK9")
		}
	}
	for _, s := range strings.Fields("ghp_" + strings.Repeat("a", 40) + " sk-ant-api03-... -----BEGIN_RSA_PRIVATE_KEY----- Authorization:_Bearer_x " +
		"eyJhbGciOi.eyJ AKIAIOSFODNN7EXAMPLE aws_secret_access_key_=_short https://u:${P}@h") {
		add(strings.ReplaceAll(s, "_", " "))
	}
	return strings.Repeat(unit.String(), size/unit.Len()+1)[:size]
}
