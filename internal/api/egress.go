package api

// EgressHost is the body of POST /api/sessions/{id}/egress/allow and
// /egress/request: a host the Session's egress allowlist refused, as its
// note in the history names it (Event.Blocked).
type EgressHost struct {
	Host string `json:"host"`
}

// EgressAsked answers a Request to allow a host: how many Members with
// push it went to (their notification webhooks, kind egress_requested).
type EgressAsked struct {
	Asked int `json:"asked"`
}
