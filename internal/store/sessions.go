package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
)

// Repo is a repository Sessions run on.
type Repo struct {
	ID        string
	URL       string
	Name      string
	CreatedAt time.Time
}

const repoCols = `id, url, name, created_at`

func scanRepo(row scanner) (Repo, error) {
	var r Repo
	var created int64
	err := row.Scan(&r.ID, &r.URL, &r.Name, &created)
	r.CreatedAt = time.UnixMilli(created)
	return r, err
}

// EnsureRepo returns the Repo with that URL, making it on first use.
func (s *Repos) EnsureRepo(ctx context.Context, url, name string) (Repo, error) {
	var r Repo
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		var err error
		r, err = scanRepo(tx.QueryRowContext(ctx, `SELECT `+repoCols+` FROM repos WHERE url = ?`, url))
		if err != sql.ErrNoRows {
			return err
		}
		r = Repo{ID: uuid.NewString(), URL: url, Name: name, CreatedAt: s.now()}
		_, err = tx.ExecContext(ctx, `INSERT INTO repos (id, url, name, created_at) VALUES (?, ?, ?, ?)`, r.ID, r.URL, r.Name, ms(r.CreatedAt))
		return err
	})
	return r, err
}

// SessionState is where a Session is in its life.
type SessionState string

const (
	Starting SessionState = "starting"
	Active   SessionState = "active"
	Asleep   SessionState = "asleep"
	Frozen   SessionState = "frozen"
	Failed   SessionState = "failed"
	Archived SessionState = "archived"
)

// Session is one conversation of Claude Code in its own Sandbox.
type Session struct {
	ID          string
	RepoID      string
	RepoURL     string
	CreatorID   string
	RunnerID    string
	Title       string
	Model       string
	Effort      string
	State       SessionState
	StateDetail string
	// Conversation is whether Claude Code has written the conversation
	// down, so a wake resumes it.
	Conversation bool
	// KeepAwake is the Creator's switch: on, the Session never sleeps for
	// being idle, and wakes when its Runner connects.
	KeepAwake bool
	// Transient marks a Failed start a retry may mend (its Runner was away,
	// a registry did not answer).
	Transient bool
	// StartRetries counts the Hub's retries of its start since it last
	// came up (RetryStart).
	StartRetries int
	// SandboxGit is what its current Sandbox token lets git do: "write"
	// (push, pull requests) or "read", "" until one is minted
	// (SetSandboxGit).
	SandboxGit string
	// Triggered marks a Session a GitHub trigger started: it runs
	// unattended, so its Repo's Turn limits hold it (RepoLimits).
	Triggered bool
	// Turns and TurnTime count the prompts the Hub sent it and its time
	// awake from the first (CountTurn, AddTurnTime).
	Turns    int
	TurnTime time.Duration
	// ThreadContext is the Creator's switch: on, comments by others on
	// the Session's issue or pull request show in its history as context
	// (never as prompts).
	ThreadContext bool
	// Place is its place in its Creator's line for an awake place (from
	// 1), 0 while it is in none (SetWaiting).
	Place int
	// EnvironmentVersion is the version of its Repo's Environment it
	// last started on, 0 for the Runner's defaults
	// (Environments.SetSessionEnvironment).
	EnvironmentVersion int
	ArchivedAt         time.Time
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

const sessionCols = `s.id, s.repo_id, r.url, s.creator_id, s.runner_id, s.title, s.model, s.effort, s.state, s.state_detail, s.conversation, s.keep_awake, s.transient, s.start_retries, s.sandbox_git, s.triggered, s.turns, s.turn_ms, s.thread_context, ` + placeCol + `, s.environment_version, s.archived_at, s.created_at, s.updated_at`
const sessionFrom = ` FROM sessions s JOIN repos r ON r.id = s.repo_id `

func scanSession(row scanner) (Session, error) {
	var x Session
	var created, updated, turnMS int64
	var archived sql.NullInt64
	err := row.Scan(&x.ID, &x.RepoID, &x.RepoURL, &x.CreatorID, &x.RunnerID, &x.Title, &x.Model, &x.Effort,
		&x.State, &x.StateDetail, &x.Conversation, &x.KeepAwake, &x.Transient, &x.StartRetries, &x.SandboxGit,
		&x.Triggered, &x.Turns, &turnMS, &x.ThreadContext, &x.Place, &x.EnvironmentVersion, &archived, &created, &updated)
	x.CreatedAt, x.UpdatedAt, x.ArchivedAt = time.UnixMilli(created), time.UnixMilli(updated), fromMS(archived)
	x.TurnTime = time.Duration(turnMS) * time.Millisecond
	return x, err
}

// CreateSession records a new Session in state Starting and returns it;
// one x says is Asleep is recorded so, at the end of its Creator's line
// for an awake place (SetWaiting).
func (s *Sessions) CreateSession(ctx context.Context, x Session) (Session, error) {
	now := s.now()
	line, exec := "NULL", s.exec
	if x.State == Asleep {
		line, exec = nextInLine, s.joinLine
	} else {
		x.State = Starting
	}
	x.ID, x.CreatedAt, x.UpdatedAt = uuid.NewString(), now, now
	_, err := exec(ctx, `INSERT INTO sessions (id, repo_id, creator_id, runner_id, title, model, effort, state, triggered, line_seq, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, `+line+`, ?, ?)`, x.ID, x.RepoID, x.CreatorID, x.RunnerID, x.Title, x.Model, x.Effort, x.State, x.Triggered, ms(now), ms(now))
	if err != nil {
		return Session{}, fmt.Errorf("create session: %w", err)
	}
	return s.SessionByID(ctx, x.ID)
}

// SessionByID returns a Session, or ErrNotFound.
func (s *Sessions) SessionByID(ctx context.Context, id string) (Session, error) {
	defer s.timed("session_by_id")()
	x, err := scanSession(s.db.QueryRowContext(ctx, `SELECT `+sessionCols+sessionFrom+`WHERE s.id = ?`, id))
	return x, notFound(err, "session "+id)
}

// SessionFilter selects Sessions; zero fields match everything.
type SessionFilter struct {
	RunnerID string
	States   []SessionState
}

// List lists Sessions, newest first.
func (s *Sessions) List(ctx context.Context, f SessionFilter) ([]Session, error) {
	q := `SELECT ` + sessionCols + sessionFrom + `WHERE 1=1`
	var args []any
	if f.RunnerID != "" {
		q += ` AND s.runner_id = ?`
		args = append(args, f.RunnerID)
	}
	if len(f.States) > 0 {
		q += ` AND s.state IN (?` + strings.Repeat(",?", len(f.States)-1) + `)`
		for _, st := range f.States {
			args = append(args, st)
		}
	}
	return queryAll(ctx, s.db, scanSession, q+` ORDER BY s.created_at DESC`, args...)
}

// MoveSession moves a Session from one state to another with a detail a
// person reads (why it is asleep, what failed), and whether a Failed start
// may mend on a retry. Active, a start that came up, ends the count of its
// retries (RetryStart). It returns ErrConflict if the Session is no longer
// in from, so two changes never both win; internal/hub/session is its one
// caller.
func (s *Sessions) MoveSession(ctx context.Context, id string, from, to SessionState, detail string, transient bool) error {
	defer s.timed("move_session")()
	now := ms(s.now())
	var archived any
	if to == Archived {
		archived = now
	}
	retries := ""
	if to == Active {
		retries = "start_retries = 0, "
	}
	if to != Asleep && to != Failed {
		retries += "line_seq = NULL, " // awake or archived: out of the line
	}
	res, err := s.exec(ctx, `UPDATE sessions SET `+retries+`state = ?, state_detail = ?, transient = ?, archived_at = ?, updated_at = ? WHERE id = ? AND state = ?`,
		to, detail, transient, archived, now, id, from)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := s.SessionByID(ctx, id); err != nil {
			return err
		}
		return fmt.Errorf("session %s is no longer %s: %w", id, from, errdefs.ErrConflict)
	}
	return nil
}

// RetryStart counts one more retry of a Session's start and returns the
// count since the Session last came up (MoveSession to Active), which a
// restart of the Hub keeps.
func (s *Sessions) RetryStart(ctx context.Context, id string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `UPDATE sessions SET start_retries = start_retries + 1 WHERE id = ? RETURNING start_retries`, id).Scan(&n)
	return n, notFound(err, "session "+id)
}

// SwapSandboxToken keeps sealed as a Session's current Sandbox token (nil:
// none) and returns the one it replaces, nil if none.
func (s *Sessions) SwapSandboxToken(ctx context.Context, id string, sealed []byte) ([]byte, error) {
	var prev []byte
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT sandbox_token FROM sessions WHERE id = ?`, id).Scan(&prev); err != nil {
			return notFound(err, "session "+id)
		}
		_, err := tx.ExecContext(ctx, `UPDATE sessions SET sandbox_token = ? WHERE id = ?`, sealed, id)
		return err
	})
	return prev, err
}

// SetSandboxGit records what the Session's newest Sandbox token lets git
// do ("write" or "read"), and reports whether that changed.
func (s *Sessions) SetSandboxGit(ctx context.Context, id, git string) (bool, error) {
	res, err := s.exec(ctx, `UPDATE sessions SET sandbox_git = ? WHERE id = ? AND sandbox_git <> ?`, git, id, git)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// SetKeepAwake sets a Session's Keep awake switch.
func (s *Sessions) SetKeepAwake(ctx context.Context, id string, on bool) error {
	return s.setSwitch(ctx, id, "keep_awake", on)
}

// SetThreadContext sets a Session's switch for others' comments on its
// issue or pull request as context in its history.
func (s *Sessions) SetThreadContext(ctx context.Context, id string, on bool) error {
	return s.setSwitch(ctx, id, "thread_context", on)
}

// setSwitch sets one of the Creator's switches of a Session, the column
// col (a constant of the callers', never input).
func (s *Sessions) setSwitch(ctx context.Context, id, col string, on bool) error {
	res, err := s.exec(ctx, `UPDATE sessions SET `+col+` = ?, updated_at = ? WHERE id = ?`, on, ms(s.now()), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("session %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

// SetConversation records that Claude Code has written the Session's
// conversation down.
func (s *Sessions) SetConversation(ctx context.Context, id string) error {
	_, err := s.exec(ctx, `UPDATE sessions SET conversation = 1 WHERE id = ?`, id)
	return err
}

// IssueModToken makes a fresh mod token for a run of the Session,
// replacing the last one, and returns it once.
func (s *Sessions) IssueModToken(ctx context.Context, sessionID string) (string, error) {
	token, hash := auth.NewToken(auth.Mod)
	_, err := s.exec(ctx, `UPDATE sessions SET mod_token_hash = ? WHERE id = ?`, hash, sessionID)
	return token, err
}

// RevokeModToken ends the Session's current run's mod token.
func (s *Sessions) RevokeModToken(ctx context.Context, sessionID string) error {
	_, err := s.exec(ctx, `UPDATE sessions SET mod_token_hash = NULL WHERE id = ?`, sessionID)
	return err
}

// SessionByModToken returns the Session a live mod token is for, or
// ErrUnauthorized.
func (s *Sessions) SessionByModToken(ctx context.Context, token string) (Session, error) {
	defer s.timed("session_by_mod_token")()
	hash := auth.Hash(token)
	var stored []byte
	row := s.db.QueryRowContext(ctx, `SELECT s.mod_token_hash, `+sessionCols+sessionFrom+`WHERE s.mod_token_hash = ?`, hash)
	x, err := scanSession(scanAfter{row, &stored})
	if err != nil || !auth.Equal(stored, hash) {
		return Session{}, fmt.Errorf("mod token: %w", errdefs.ErrUnauthorized)
	}
	return x, nil
}

// scanAfter is a row whose first column goes to first, the rest as its
// scanner's caller asks.
type scanAfter struct {
	row   scanner
	first any
}

func (r scanAfter) Scan(dest ...any) error { return r.row.Scan(append([]any{r.first}, dest...)...) }

// Event is one stored Event of a Session's transcript. Data is the Event's
// JSON, already redacted.
type Event struct {
	Seq  int64
	At   time.Time
	Kind string
	Data json.RawMessage
	// Reply, on append, is the usage of the model reply the Event came
	// from, counted in its Turn once by its id (usage.go).
	Reply *Reply
	// SumTurn, on append (a turn_end), makes the Event's Data from what
	// its Turn spent, by model, read in the same transaction.
	SumTurn func([]Usage) (json.RawMessage, error)
}

// AppendEvents stores events after the Session's last one and returns them
// numbered.
func (s *Sessions) AppendEvents(ctx context.Context, sessionID string, evs []Event) ([]Event, error) {
	defer s.timed("append_events")()
	err := s.inTx(ctx, sessionTurn(sessionID), func(tx *sql.Tx) error {
		var last int64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM events WHERE session_id = ?`, sessionID).Scan(&last); err != nil {
			return err
		}
		for i := range evs {
			if evs[i].At.IsZero() {
				evs[i].At = s.now()
			}
		}
		if err := countReplies(ctx, tx, sessionID, last, evs); err != nil {
			return err
		}
		for i := range evs {
			last++
			evs[i].Seq = last
			if _, err := tx.ExecContext(ctx, `INSERT INTO events (session_id, seq, at, kind, data) VALUES (?, ?, ?, ?, ?)`,
				sessionID, last, ms(evs[i].At), evs[i].Kind, string(evs[i].Data)); err != nil {
				return err
			}
		}
		return nil
	})
	return evs, err
}

// Events returns up to limit of a Session's Events after seq.
func (s *Sessions) Events(ctx context.Context, sessionID string, after int64, limit int) ([]Event, error) {
	return queryAll(ctx, s.db, scanEvent, `SELECT seq, at, kind, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`, sessionID, after, limit)
}

func scanEvent(row scanner) (Event, error) {
	var e Event
	var at int64
	var data string
	err := row.Scan(&e.Seq, &at, &e.Kind, &data)
	e.At, e.Data = time.UnixMilli(at), json.RawMessage(data)
	return e, err
}

// EventUse is what a Session's Events take in the store.
type EventUse struct {
	Rows, Bytes int64 // the Events stored, and the bytes of their data
	// NoteSeq is the Hub's note that it dropped Events of the Session (0
	// for none), and Dropped how many it says.
	NoteSeq, Dropped int64
}

// EventUse reads what a Session's Events take in the store.
func (s *Sessions) EventUse(ctx context.Context, sessionID string) (EventUse, error) {
	var u EventUse
	err := s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(length(data)), 0) FROM events WHERE session_id = ?`, sessionID).Scan(&u.Rows, &u.Bytes)
	if err != nil {
		return u, err
	}
	err = s.db.QueryRowContext(ctx, `SELECT seq, CAST(json_extract(data, '$.dropped') AS BIGINT) FROM events
		WHERE session_id = ? AND kind = 'note' AND json_extract(data, '$.dropped') IS NOT NULL ORDER BY seq DESC LIMIT 1`, sessionID).Scan(&u.NoteSeq, &u.Dropped)
	if err == sql.ErrNoRows {
		err = nil
	}
	return u, err
}

// SetEventData rewrites the data of a Session's stored Event: the Hub's
// note of the Events it dropped, kept up to date. ErrNotFound for none.
func (s *Sessions) SetEventData(ctx context.Context, sessionID string, seq int64, data []byte) error {
	res, err := s.exec(ctx, `UPDATE events SET data = ? WHERE session_id = ? AND seq = ?`, string(data), sessionID, seq)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("event %d of session %s: %w", seq, sessionID, errdefs.ErrNotFound)
	}
	return nil
}

// EventByToolID returns the Session's latest Event of kind whose tool_id
// is toolID, or ErrNotFound.
func (s *Sessions) EventByToolID(ctx context.Context, sessionID, kind, toolID string) (Event, error) {
	e, err := scanEvent(s.db.QueryRowContext(ctx, `SELECT seq, at, kind, data FROM events WHERE session_id = ? AND kind = ?
		AND json_extract(data, '$.tool_id') = ? ORDER BY seq DESC LIMIT 1`, sessionID, kind, toolID))
	return e, notFound(err, kind+" "+toolID)
}

// noteFields are the fields of a note NoteWith looks a value up by: the
// host a Runner's note says its egress proxy refused, and the host the
// Hub's note says the Creator asked to allow.
var noteFields = map[string]string{"blocked": "$.blocked", "requested": "$.requested"}

// NoteWith returns the Session's first note whose field (one of
// noteFields) is value, or ErrNotFound.
func (s *Sessions) NoteWith(ctx context.Context, sessionID, field, value string) (Event, error) {
	path, ok := noteFields[field]
	if !ok {
		return Event{}, fmt.Errorf("a note has no field %q to look up: %w", field, errdefs.ErrInvalid)
	}
	e, err := scanEvent(s.db.QueryRowContext(ctx, `SELECT seq, at, kind, data FROM events WHERE session_id = ? AND kind = 'note'
		AND json_extract(data, ?) = ? ORDER BY seq LIMIT 1`, sessionID, path, value))
	return e, notFound(err, "a note with "+field+" "+value)
}

// TurnOpen reports whether the Session's last top-level turn_start has no
// turn_end after it: a Turn ran when the Hub last heard.
func (s *Sessions) TurnOpen(ctx context.Context, sessionID string) (bool, error) {
	var kind string
	err := s.db.QueryRowContext(ctx, `SELECT kind FROM events WHERE session_id = ? AND kind IN ('turn_start', 'turn_end')
		AND coalesce(json_extract(data, '$.agent'), '') = '' ORDER BY seq DESC LIMIT 1`, sessionID).Scan(&kind)
	if err == sql.ErrNoRows {
		return false, nil
	}
	return kind == "turn_start", err
}

// RunningSubagents returns the subagents the Session's Events say still
// run: each agent id whose last subagent_start has no subagent_end after
// it, mapped to the Agent tool call that started it, as its start or else
// its own Events name it ("" when none does).
func (s *Sessions) RunningSubagents(ctx context.Context, sessionID string) (map[string]string, error) {
	type agent struct{ id, parent string }
	list, err := queryAll(ctx, s.db, func(row scanner) (agent, error) {
		var a agent
		return a, row.Scan(&a.id, &a.parent)
	}, `SELECT json_extract(st.data, '$.agent'), coalesce(json_extract(st.data, '$.parent'),
			(SELECT json_extract(x.data, '$.parent') FROM events x WHERE x.session_id = st.session_id
				AND json_extract(x.data, '$.agent') = json_extract(st.data, '$.agent') AND json_extract(x.data, '$.parent') != '' LIMIT 1), '')
		FROM events st
		WHERE st.session_id = ? AND st.kind = 'subagent_start' AND coalesce(json_extract(st.data, '$.agent'), '') != ''
		AND NOT EXISTS (SELECT 1 FROM events en WHERE en.session_id = st.session_id AND en.kind = 'subagent_end'
			AND en.seq > st.seq AND json_extract(en.data, '$.agent') = json_extract(st.data, '$.agent'))`, sessionID)
	out := map[string]string{}
	for _, a := range list {
		out[a.id] = a.parent
	}
	return out, err
}

// SetTranscriptOffsets records how far a Session's transcript is stored.
func (s *Sessions) SetTranscriptOffsets(ctx context.Context, id string, offsets map[string]int64) error {
	b, err := json.Marshal(offsets)
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, `UPDATE sessions SET transcript_offsets = ? WHERE id = ?`, string(b), id)
	return err
}

// TitleFromPull gives a Session its pull request's title, unless a person
// named it (UpdateSession), and reports whether the title changed.
func (s *Sessions) TitleFromPull(ctx context.Context, id, title string) (bool, error) {
	res, err := s.exec(ctx, `UPDATE sessions SET title = ?, updated_at = ? WHERE id = ? AND titled = 0 AND title <> ?`,
		title, ms(s.now()), id, title)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// TranscriptOffsets returns how far a Session's transcript is stored.
func (s *Sessions) TranscriptOffsets(ctx context.Context, id string) (map[string]int64, error) {
	var raw string
	if err := s.db.QueryRowContext(ctx, `SELECT transcript_offsets FROM sessions WHERE id = ?`, id).Scan(&raw); err != nil {
		return nil, notFound(err, "session "+id)
	}
	var m map[string]int64
	return m, json.Unmarshal([]byte(raw), &m)
}

// UpdateSession changes a Session's title, model and effort, as a person
// asks: a title changed so no longer follows its pull request's
// (TitleFromPull).
func (s *Sessions) UpdateSession(ctx context.Context, id, title, model, effort string) error {
	res, err := s.exec(ctx, `UPDATE sessions SET titled = CASE WHEN title <> ? THEN 1 ELSE titled END, title = ?, model = ?, effort = ?, updated_at = ? WHERE id = ?`,
		title, title, model, effort, ms(s.now()), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("session %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}
