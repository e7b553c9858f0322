// wsecho is a small web app the browser tests run in a Sandbox: a page at /
// whose script opens a WebSocket to /ws on its own origin, /ws echoing
// what it gets, and /headers showing the request it got. It listens on the Sandbox's loopback only.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"net/http"

	"github.com/coder/websocket"
)

const page = `<!doctype html><title>wsecho</title><h1 id="hello">forwarded app</h1><p id="host"></p><p id="echo">waiting</p>
<script>
document.getElementById("host").textContent = "host " + location.host;
const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
ws.onopen = () => ws.send("ping through the forward");
ws.onmessage = (m) => { document.getElementById("echo").textContent = "echo: " + m.data; };
ws.onerror = () => { document.getElementById("echo").textContent = "websocket failed"; };
</script>`

func main() {
	addr := flag.String("addr", "127.0.0.1:8000", "where to listen")
	flag.Parse()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(page))
	})
	http.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"host": r.Host, "header": r.Header})
	})
	http.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, b, err := c.Read(context.Background())
			if err != nil {
				return
			}
			c.Write(context.Background(), typ, b)
		}
	})
	log.Fatal(http.ListenAndServe(*addr, nil))
}
