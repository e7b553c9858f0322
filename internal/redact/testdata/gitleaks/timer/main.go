// This program is built in a copy of gitleaks' module (BenchmarkRatio's
// dense rows): it runs gitleaks' own detector, with its default config,
// over the text in the file named by its second argument, and prints the
// CPU time of the detection alone (user + system, GC included, as the
// benchmark counts its own) in nanoseconds and the number of findings.
//
// With "lines" the detector is given each line as a fragment of its own,
// its quickest use (a rule's regexp runs only over the lines holding one
// of its keywords); with "file" it reads the text as gitleaks reads a file
// (DetectReader in chunks of 100 KB, its default), where every rule whose
// keyword is somewhere in a chunk runs its regexp over the whole chunk.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/zricethezav/gitleaks/v8/detect"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	if len(os.Args) != 3 || os.Args[1] != "lines" && os.Args[1] != "file" {
		fail("usage: timer lines|file FILE")
	}
	text, err := os.ReadFile(os.Args[2])
	if err != nil {
		fail(err.Error())
	}
	d, err := detect.NewDetectorDefaultConfig()
	if err != nil {
		fail(err.Error())
	}
	lines := strings.SplitAfter(string(text), "\n")
	start := cpuTime()
	n := 0
	if os.Args[1] == "lines" {
		for _, l := range lines {
			n += len(d.DetectString(l))
		}
	} else {
		fs, err := d.DetectReader(bytes.NewReader(text), 100)
		if err != nil {
			fail(err.Error())
		}
		n = len(fs)
	}
	fmt.Println(int64(cpuTime()-start), n)
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(2)
}
