package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"kndl.dev/kndl/internal/errdefs"
)

// MCPServer is a remote MCP server's definition (ADR 0020).
type MCPServer struct {
	ID      string // hub:<slug>
	Name    string
	URL     string
	Auth    string // none, headers or oauth
	Headers []HeaderSecret
	// CreatedBy is the User who made it.
	CreatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// HeaderSecret is one header secret a server declares: Header is sent as
// Format with {value} replaced by an Installation's value of Key.
type HeaderSecret struct {
	Key    string
	Header string
	Format string
}

// Installation is a named, configured copy of one MCP server: Global (on
// in every Repo) or on in Repos (their ids).
type Installation struct {
	ID        string
	ServerID  string
	Name      string
	Global    bool
	Repos     []string
	CreatedBy string
	CreatedAt time.Time
}

// InstallationValue is one header secret value of an Installation, sealed.
type InstallationValue struct {
	Key    string
	Sealed []byte
	SetBy  string
	SetAt  time.Time
}

// InstallationChange is one row of a Repo's log of Installation changes;
// RepoID is empty for a change to a global Installation.
type InstallationChange struct {
	Seq            int64
	RepoID         string
	InstallationID string
	At             time.Time
	ActorID        string
	What           string
}

// SessionInstallation is an Installation as a Session's run started with
// it: the server's URL then, and its headers sealed for the Session.
type SessionInstallation struct {
	InstallationID string
	Name           string
	URL            string
	Headers        []byte
}

// CreateMCPServer records a new MCP server, or ErrConflict if its id is
// taken.
func (s *MCP) CreateMCPServer(ctx context.Context, m MCPServer) (MCPServer, error) {
	now := s.now()
	m.CreatedAt, m.UpdatedAt = now, now
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM mcp_servers WHERE id = ?`, m.ID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("an MCP server %s exists already: %w", m.ID, errdefs.ErrConflict)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO mcp_servers (id, name, url, auth, created_by, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			m.ID, m.Name, m.URL, m.Auth, m.CreatedBy, ms(now), ms(now)); err != nil {
			return err
		}
		return putHeaders(ctx, tx, m.ID, m.Headers)
	})
	return m, err
}

func putHeaders(ctx context.Context, tx *sql.Tx, serverID string, hs []HeaderSecret) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM mcp_server_headers WHERE server_id = ?`, serverID); err != nil {
		return err
	}
	for _, h := range hs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO mcp_server_headers (server_id, key, header, format) VALUES (?, ?, ?, ?)`,
			serverID, h.Key, h.Header, h.Format); err != nil {
			return err
		}
	}
	return nil
}

// UpdateMCPServer replaces a server's name, URL, auth and header secrets,
// and, in the same transaction, drops the values of every Installation of
// it whose key is in clear (all of them, and every OAuth client and token,
// when clearAll). was and ins are the server and its Installations as the
// caller read them to decide clear and who may edit: if either changed
// since, it returns ErrConflict and changes nothing, so an edit never
// clears values on a URL, header or Installation it did not see. It
// returns ErrNotFound for a server there is not.
func (s *MCP) UpdateMCPServer(ctx context.Context, was MCPServer, ins []Installation, m MCPServer, clearAll bool, clear []string) error {
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		if err := sameServer(ctx, tx, was, ins); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE mcp_servers SET name = ?, url = ?, auth = ?, updated_at = ? WHERE id = ?`, m.Name, m.URL, m.Auth, ms(s.now()), m.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("MCP server %s: %w", m.ID, errdefs.ErrNotFound)
		}
		if err := putHeaders(ctx, tx, m.ID, m.Headers); err != nil {
			return err
		}
		const ofServer = `installation_id IN (SELECT id FROM installations WHERE server_id = ?)`
		if clearAll {
			if _, err := tx.ExecContext(ctx, `DELETE FROM installation_oauth WHERE `+ofServer, m.ID); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `DELETE FROM installation_values WHERE `+ofServer, m.ID)
			return err
		}
		for _, k := range clear {
			if _, err := tx.ExecContext(ctx, `DELETE FROM installation_values WHERE key = ? AND `+ofServer, k, m.ID); err != nil {
				return err
			}
		}
		return nil
	})
}

// sameServer returns ErrConflict unless server was.ID has was's URL and
// header secrets and exactly the Installations ins, each on the same
// Repos, as tx sees them.
func sameServer(ctx context.Context, tx *sql.Tx, was MCPServer, ins []Installation) error {
	now, err := scanMCPServer(tx.QueryRowContext(ctx, `SELECT `+mcpServerCols+` FROM mcp_servers WHERE id = ?`, was.ID))
	if err != nil {
		return notFound(err, "MCP server "+was.ID)
	}
	if now.Headers, err = headersOf(ctx, tx, was.ID); err != nil {
		return err
	}
	nowIns, err := queryAll(ctx, tx, scanInstallation, `SELECT `+installationCols+` FROM installations WHERE server_id = ? ORDER BY id`, was.ID)
	for i := range nowIns {
		if err != nil {
			break
		}
		nowIns[i].Repos, err = reposOf(ctx, tx, nowIns[i].ID)
	}
	if err != nil {
		return err
	}
	sameIn := func(a, b Installation) bool {
		return a.ID == b.ID && a.Global == b.Global && slices.Equal(a.Repos, b.Repos)
	}
	if now.URL != was.URL || !slices.Equal(now.Headers, was.Headers) || !slices.EqualFunc(nowIns, ins, sameIn) {
		return fmt.Errorf("MCP server %s changed while you edited it (its URL, its header secrets, or its Installations and their Repos); "+
			"look at it again and repeat the edit: %w", was.ID, errdefs.ErrConflict)
	}
	return nil
}

// MCPServerByID returns a server with its header secrets, or ErrNotFound.
func (s *MCP) MCPServerByID(ctx context.Context, id string) (MCPServer, error) {
	m, err := scanMCPServer(s.db.QueryRowContext(ctx, `SELECT `+mcpServerCols+` FROM mcp_servers WHERE id = ?`, id))
	if err != nil {
		return m, notFound(err, "MCP server "+id)
	}
	m.Headers, err = headersOf(ctx, s.db, id)
	return m, err
}

// MCPServers lists every server with its header secrets.
func (s *MCP) MCPServers(ctx context.Context) ([]MCPServer, error) {
	ms, err := queryAll(ctx, s.db, scanMCPServer, `SELECT `+mcpServerCols+` FROM mcp_servers ORDER BY id`)
	for i := range ms {
		if err != nil {
			break
		}
		ms[i].Headers, err = headersOf(ctx, s.db, ms[i].ID)
	}
	return ms, err
}

func headersOf(ctx context.Context, db querier, serverID string) ([]HeaderSecret, error) {
	return queryAll(ctx, db, func(row scanner) (HeaderSecret, error) {
		var h HeaderSecret
		return h, row.Scan(&h.Key, &h.Header, &h.Format)
	}, `SELECT key, header, format FROM mcp_server_headers WHERE server_id = ? ORDER BY key`, serverID)
}

const mcpServerCols = `id, name, url, auth, created_by, created_at, updated_at`

func scanMCPServer(row scanner) (MCPServer, error) {
	var m MCPServer
	var created, updated int64
	err := row.Scan(&m.ID, &m.Name, &m.URL, &m.Auth, &m.CreatedBy, &created, &updated)
	m.CreatedAt, m.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	return m, err
}

// CreateInstallation records a new Installation, logging what to each Repo
// it is on in as actorID. It returns ErrConflict if its id is taken, or if
// it would make a second Installation of its server on a Repo: a second
// global one, or a second one listing the same Repo.
func (s *MCP) CreateInstallation(ctx context.Context, in Installation, actorID, what string) (Installation, error) {
	in.CreatedAt = s.now()
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM installations WHERE id = ?`, in.ID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("an Installation %s exists already: %w", in.ID, errdefs.ErrConflict)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO installations (id, server_id, name, global, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			in.ID, in.ServerID, in.Name, in.Global, in.CreatedBy, ms(in.CreatedAt)); err != nil {
			return err
		}
		if err := s.putRepos(ctx, tx, in); err != nil {
			return err
		}
		return s.logChange(ctx, tx, in, actorID, what)
	})
	return in, err
}

// SetInstallationRepos replaces the Repos a Repo-scoped Installation is on
// in, with CreateInstallation's conflicts, logging what to the Repos it was
// and is on in.
func (s *MCP) SetInstallationRepos(ctx context.Context, id string, repos []string, actorID, what string) error {
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		in, err := installationIn(ctx, tx, id)
		if err != nil {
			return err
		}
		if in.Global {
			return fmt.Errorf("Installation %s is global: it is on in every Repo: %w", id, errdefs.ErrInvalid)
		}
		before := in
		in.Repos = repos
		if _, err := tx.ExecContext(ctx, `DELETE FROM installation_repos WHERE installation_id = ?`, id); err != nil {
			return err
		}
		if err := s.putRepos(ctx, tx, in); err != nil {
			return err
		}
		before.Repos = union(before.Repos, repos)
		return s.logChange(ctx, tx, before, actorID, what)
	})
}

func union(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range append(append([]string(nil), a...), b...) {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// putRepos lists in's Repos, refusing a second Installation of its
// server on a Repo.
func (s *MCP) putRepos(ctx context.Context, tx *sql.Tx, in Installation) error {
	if in.Global {
		var other string
		err := tx.QueryRowContext(ctx, `SELECT id FROM installations WHERE server_id = ? AND global = 1 AND id <> ?`, in.ServerID, in.ID).Scan(&other)
		if err == nil {
			return fmt.Errorf("a global Installation of %s exists already (%s): a Repo has at most one Installation of each MCP server: %w", in.ServerID, other, errdefs.ErrConflict)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		return nil
	}
	for _, repo := range in.Repos {
		var other string
		err := tx.QueryRowContext(ctx, `SELECT i.id FROM installations i JOIN installation_repos r ON r.installation_id = i.id
			WHERE i.server_id = ? AND r.repo_id = ? AND i.id <> ?`, in.ServerID, repo, in.ID).Scan(&other)
		if err == nil {
			return fmt.Errorf("Installation %s of %s is on in Repo %s already: a Repo has at most one Installation of each MCP server: %w", other, in.ServerID, repo, errdefs.ErrConflict)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO installation_repos (installation_id, repo_id) VALUES (?, ?)`, in.ID, repo); err != nil {
			return err
		}
	}
	return nil
}

// logChange logs what to every Repo in is on in: to all of them for a
// global one.
func (s *MCP) logChange(ctx context.Context, tx *sql.Tx, in Installation, actorID, what string) error {
	repos := []sql.NullString{{}}
	if !in.Global {
		repos = repos[:0]
		for _, r := range in.Repos {
			repos = append(repos, sql.NullString{String: r, Valid: true})
		}
	}
	for _, r := range repos {
		if _, err := tx.ExecContext(ctx, `INSERT INTO installation_log (repo_id, installation_id, at, actor_id, what) VALUES (?, ?, ?, ?, ?)`,
			r, in.ID, ms(s.now()), actorID, what); err != nil {
			return err
		}
	}
	return nil
}

// LogInstallationChange logs what, done to the Installation id by actorID,
// to every Repo it is on in.
func (s *MCP) LogInstallationChange(ctx context.Context, id, actorID, what string) error {
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		in, err := installationIn(ctx, tx, id)
		if err != nil {
			return err
		}
		return s.logChange(ctx, tx, in, actorID, what)
	})
}

// InstallationLog returns a Repo's log of Installation changes, global
// ones included, oldest first.
func (s *MCP) InstallationLog(ctx context.Context, repoID string) ([]InstallationChange, error) {
	return queryAll(ctx, s.db, func(row scanner) (InstallationChange, error) {
		var c InstallationChange
		var repo sql.NullString
		var at int64
		err := row.Scan(&c.Seq, &repo, &c.InstallationID, &at, &c.ActorID, &c.What)
		c.RepoID, c.At = repo.String, time.UnixMilli(at)
		return c, err
	}, `SELECT seq, repo_id, installation_id, at, actor_id, what FROM installation_log WHERE repo_id = ? OR repo_id IS NULL ORDER BY seq`, repoID)
}

// InstallationByID returns an Installation with its Repos, or ErrNotFound.
func (s *MCP) InstallationByID(ctx context.Context, id string) (Installation, error) {
	return installationIn(ctx, s.db, id)
}

func installationIn(ctx context.Context, db querier, id string) (Installation, error) {
	in, err := scanInstallation(db.QueryRowContext(ctx, `SELECT `+installationCols+` FROM installations WHERE id = ?`, id))
	if err != nil {
		return in, notFound(err, "Installation "+id)
	}
	in.Repos, err = reposOf(ctx, db, id)
	return in, err
}

// Installations lists every Installation with its Repos.
func (s *MCP) Installations(ctx context.Context) ([]Installation, error) {
	ins, err := queryAll(ctx, s.db, scanInstallation, `SELECT `+installationCols+` FROM installations ORDER BY id`)
	for i := range ins {
		if err != nil {
			break
		}
		ins[i].Repos, err = reposOf(ctx, s.db, ins[i].ID)
	}
	return ins, err
}

func reposOf(ctx context.Context, db querier, id string) ([]string, error) {
	repos, err := queryAll(ctx, db, scanString, `SELECT repo_id FROM installation_repos WHERE installation_id = ? ORDER BY repo_id`, id)
	if repos == nil {
		repos = []string{}
	}
	return repos, err
}

const installationCols = `id, server_id, name, global, created_by, created_at`

func scanInstallation(row scanner) (Installation, error) {
	var in Installation
	var created int64
	err := row.Scan(&in.ID, &in.ServerID, &in.Name, &in.Global, &in.CreatedBy, &created)
	in.CreatedAt = time.UnixMilli(created)
	return in, err
}

// SetInstallationValue stores an Installation's sealed value of a header
// secret, replacing the one it had, and logs it by key.
func (s *MCP) SetInstallationValue(ctx context.Context, id, key string, sealed []byte, actorID string) error {
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		in, err := installationIn(ctx, tx, id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO installation_values (installation_id, key, sealed, set_by, set_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (installation_id, key) DO UPDATE SET sealed = excluded.sealed, set_by = excluded.set_by, set_at = excluded.set_at`,
			id, key, sealed, actorID, ms(s.now())); err != nil {
			return err
		}
		return s.logChange(ctx, tx, in, actorID, "set the value of header secret "+key)
	})
}

// InstallationValues returns an Installation's sealed values by key.
func (s *MCP) InstallationValues(ctx context.Context, id string) (map[string]InstallationValue, error) {
	vs, err := queryAll(ctx, s.db, func(row scanner) (InstallationValue, error) {
		var v InstallationValue
		var at int64
		err := row.Scan(&v.Key, &v.Sealed, &v.SetBy, &at)
		v.SetAt = time.UnixMilli(at)
		return v, err
	}, `SELECT key, sealed, set_by, set_at FROM installation_values WHERE installation_id = ?`, id)
	out := map[string]InstallationValue{}
	for _, v := range vs {
		out[v.Key] = v
	}
	return out, err
}

// SetInstallationOff turns an Installation off (or back on) for a Repo,
// logging it there.
func (s *MCP) SetInstallationOff(ctx context.Context, repoID, id string, off bool, actorID string) error {
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		if _, err := installationIn(ctx, tx, id); err != nil {
			return err
		}
		q, what := `DELETE FROM installation_off WHERE repo_id = ? AND installation_id = ?`, "turned it on for this Repo"
		if off {
			q, what = `INSERT INTO installation_off (repo_id, installation_id) VALUES (?, ?) ON CONFLICT DO NOTHING`, "turned it off for this Repo"
		}
		if _, err := tx.ExecContext(ctx, q, repoID, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO installation_log (repo_id, installation_id, at, actor_id, what) VALUES (?, ?, ?, ?, ?)`,
			repoID, id, ms(s.now()), actorID, what)
		return err
	})
}

// InstallationsOff returns the ids of the Installations a Repo turned off.
func (s *MCP) InstallationsOff(ctx context.Context, repoID string) (map[string]bool, error) {
	ids, err := queryAll(ctx, s.db, scanString, `SELECT installation_id FROM installation_off WHERE repo_id = ?`, repoID)
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out, err
}

// SetSessionInstallations replaces the Installations a Session's run
// started with.
func (s *MCP) SetSessionInstallations(ctx context.Context, sessionID string, ins []SessionInstallation) error {
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM session_installations WHERE session_id = ?`, sessionID); err != nil {
			return err
		}
		for _, in := range ins {
			if _, err := tx.ExecContext(ctx, `INSERT INTO session_installations (session_id, installation_id, name, url, headers) VALUES (?, ?, ?, ?, ?)`,
				sessionID, in.InstallationID, in.Name, in.URL, in.Headers); err != nil {
				return err
			}
		}
		return nil
	})
}

// SessionInstallations returns the Installations a Session's run started
// with.
func (s *MCP) SessionInstallations(ctx context.Context, sessionID string) ([]SessionInstallation, error) {
	return queryAll(ctx, s.db, func(row scanner) (SessionInstallation, error) {
		var in SessionInstallation
		return in, row.Scan(&in.InstallationID, &in.Name, &in.URL, &in.Headers)
	}, `SELECT installation_id, name, url, headers FROM session_installations WHERE session_id = ? ORDER BY installation_id`, sessionID)
}

// InstallationOAuth is an OAuth server's Installation's sealed client and
// tokens, each nil until set, with who set them and when.
type InstallationOAuth struct {
	Client, Tokens     []byte
	ClientBy, TokensBy string
	ClientAt, TokensAt time.Time
}

// InstallationOAuthOf returns an Installation's OAuth client and tokens
// (empty if it has none).
func (s *MCP) InstallationOAuthOf(ctx context.Context, id string) (InstallationOAuth, error) {
	var o InstallationOAuth
	var clientBy, tokensBy sql.NullString
	var clientAt, tokensAt sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT client, client_by, client_at, tokens, tokens_by, tokens_at FROM installation_oauth WHERE installation_id = ?`, id).
		Scan(&o.Client, &clientBy, &clientAt, &o.Tokens, &tokensBy, &tokensAt)
	if errors.Is(err, sql.ErrNoRows) {
		return o, nil
	}
	o.ClientBy, o.TokensBy, o.ClientAt, o.TokensAt = clientBy.String, tokensBy.String, fromMS(clientAt), fromMS(tokensAt)
	return o, err
}

// SetInstallationClient stores an Installation's sealed OAuth client and,
// when what is set, logs it as actorID.
func (s *MCP) SetInstallationClient(ctx context.Context, id string, sealed []byte, actorID, what string) error {
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		in, err := installationIn(ctx, tx, id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO installation_oauth (installation_id, client, client_by, client_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (installation_id) DO UPDATE SET client = excluded.client, client_by = excluded.client_by, client_at = excluded.client_at`,
			id, sealed, actorID, ms(s.now())); err != nil {
			return err
		}
		if what == "" {
			return nil
		}
		return s.logChange(ctx, tx, in, actorID, what)
	})
}

// SetInstallationTokens stores an Installation's sealed OAuth tokens (nil
// drops them), and, when what is set, logs it as actorID.
func (s *MCP) SetInstallationTokens(ctx context.Context, id string, sealed []byte, actorID, what string) error {
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		in, err := installationIn(ctx, tx, id)
		if err != nil {
			return err
		}
		var by sql.NullString
		var at sql.NullInt64
		if sealed != nil {
			by, at = sql.NullString{String: actorID, Valid: true}, sql.NullInt64{Int64: ms(s.now()), Valid: true}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO installation_oauth (installation_id, tokens, tokens_by, tokens_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (installation_id) DO UPDATE SET tokens = excluded.tokens, tokens_by = excluded.tokens_by, tokens_at = excluded.tokens_at`,
			id, sealed, by, at); err != nil {
			return err
		}
		if what == "" {
			return nil
		}
		return s.logChange(ctx, tx, in, actorID, what)
	})
}

// PutOAuthState records a flow under way by the state's hash.
func (s *MCP) PutOAuthState(ctx context.Context, hash []byte, installationID, userID string, verifier []byte, expires time.Time) error {
	_, err := s.exec(ctx, `INSERT INTO oauth_states (hash, installation_id, user_id, verifier, expires_at) VALUES (?, ?, ?, ?, ?)`,
		hash, installationID, userID, verifier, ms(expires))
	return err
}

// TakeOAuthState uses up the flow a state's hash names, if userID began
// it and it has not expired, and returns its Installation and sealed
// verifier; anything else is ErrNotFound, alike, and leaves it as it was.
func (s *MCP) TakeOAuthState(ctx context.Context, hash []byte, userID string) (installationID string, verifier []byte, err error) {
	err = s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT installation_id, verifier FROM oauth_states WHERE hash = ? AND user_id = ? AND expires_at > ?`,
			hash, userID, ms(s.now())).Scan(&installationID, &verifier)
		if err != nil {
			return notFound(err, "an OAuth flow under way with this state for you")
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM oauth_states WHERE hash = ? OR expires_at <= ?`, hash, ms(s.now()))
		return err
	})
	return installationID, verifier, err
}
