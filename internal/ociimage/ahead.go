package ociimage

import (
	"errors"
	"io"
	"sync"
)

// A layer's bytes are downloaded, checked against their digest and
// decompressed ahead of the tar reader, in a goroutine of their own, so that
// the gunzip (CPU-bound, single-threaded) runs on one core while the files
// are written on another, rather than the two taking turns.
const (
	aheadChunks    = 8
	aheadChunkSize = 1 << 18
)

type chunk struct {
	b   []byte
	err error // after b: io.EOF at the stream's end
}

// aheadReader reads a stream in chunks up to aheadChunks ahead of its Reads.
type aheadReader struct {
	full  chan chunk
	free  chan []byte
	quit  chan struct{}
	done  chan struct{}
	close sync.Once

	cur  []byte // what is left of the chunk being read
	last []byte // that chunk's whole buffer, freed when it is read
	err  error
}

// readAhead starts reading r in its own goroutine. Close stops it and waits
// for it, so nothing touches r after Close returns; the caller then closes
// whatever r reads from.
func readAhead(r io.Reader) *aheadReader {
	a := &aheadReader{
		full: make(chan chunk, aheadChunks),
		free: make(chan []byte, aheadChunks),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	for range aheadChunks {
		a.free <- make([]byte, aheadChunkSize)
	}
	go a.fill(r)
	return a
}

func (a *aheadReader) fill(r io.Reader) {
	defer close(a.done)
	for {
		var buf []byte
		select {
		case buf = <-a.free:
		case <-a.quit:
			return
		}
		n, err := io.ReadFull(r, buf)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		// Never blocks: there are only aheadChunks buffers.
		a.full <- chunk{b: buf[:n], err: err}
		if err != nil {
			return
		}
	}
}

func (a *aheadReader) Read(p []byte) (int, error) {
	for len(a.cur) == 0 {
		if a.err != nil {
			return 0, a.err
		}
		if a.last != nil {
			a.free <- a.last[:cap(a.last)]
			a.last = nil
		}
		c := <-a.full
		a.cur, a.last, a.err = c.b, c.b, c.err
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// Close stops the reading goroutine once its current read returns: the
// caller closes the stream under it first if that read may block.
func (a *aheadReader) Close() error {
	a.close.Do(func() { close(a.quit) })
	<-a.done
	return nil
}
