package environment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/lifetime"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// Requester asks a Runner something over its connection.
type Requester interface {
	Request(ctx context.Context, typ string, body, reply any) error
}

// Deps are what the Service takes from the Hub.
type Deps struct {
	// Store keeps the Environments: drafts, versions and Test builds.
	Store *store.Environments
	// Variables returns a Repo's Variables as a Session gets them, values
	// opened.
	Variables func(ctx context.Context, repoID string) ([]protocol.Variable, error)
	// CloneToken mints a token that reads the Repo's contents alone, ""
	// when the Hub has no GitHub App (the Runner's own credentials clone).
	CloneToken func(ctx context.Context, repoURL string) (string, error)
	// PickRunner returns a connected Runner the person may use.
	PickRunner func(ctx context.Context, userID string) (runnerID string, rc Requester, err error)
	// Redact masks a Repo's Sensitive values and credential shapes in a
	// Test build's log, as in Events.
	Redact func(ctx context.Context, repoID, text string) string
	Log    *slog.Logger
}

// Service is the one owner of Environments: drafts, versions, the Test
// build gate, and what a Session starts on.
type Service struct {
	d Deps
	// life is what the Test builds under way wait for their Runner's
	// reply under; Close ends them.
	life *lifetime.Group

	portsMu sync.Mutex
	ports   map[versionKey][]protocol.OfferedPort // PortsOf's, by version
}

// New returns a Service; Recover should run once as the Hub starts, and
// Close once it stops.
func New(d Deps) *Service {
	return &Service{d: d, life: lifetime.New(), ports: map[versionKey][]protocol.OfferedPort{}}
}

// Close stops waiting for the Test builds under way, recording each failed
// as the Hub stopped, and returns once every one is recorded.
func (s *Service) Close() { s.life.Close() }

// stopped is a Test build's detail when the Hub stopped waiting for it.
const stopped = "the Hub stopped while it ran: run it again"

// testTimeout bounds a Test build, image pull and scripts included.
const testTimeout = 30 * time.Minute

// Version is an applied version, its Config read.
type Version struct {
	store.EnvironmentVersion
	Settings Config
}

// Draft is a draft, its Config read, with what it changes and whether it
// may be applied.
type Draft struct {
	store.EnvironmentDraft
	Settings Config
	Changes  []string
	// NeedsTest: it changes the Build, so it applies only after a Test
	// build of exactly it has passed.
	NeedsTest bool
	// Test is the newest Test build of its build inputs, if any.
	Test *store.TestBuild
	// kept are the file's Variables applying it leaves as they are, and
	// why (store.FilePlan).
	kept []string
	// digest names its build inputs with vars, the Variables available at
	// build as they were read for it: Apply records, and Test sends,
	// exactly what the gate looked at.
	digest string
	vars   []protocol.Variable
}

// View is a Repo's Environment as a person sees it.
type View struct {
	RepoID  string
	Current Version // version 0: the Runner's defaults
	Draft   *Draft
}

// Recover fails the Test builds a previous run of the Hub left running.
func (s *Service) Recover(ctx context.Context) error {
	return s.d.Store.EndRunningTestBuilds(ctx, "the Hub restarted while it ran: run it again")
}

// current returns a Repo's current version, version 0 (the defaults) when
// it has none.
func (s *Service) current(ctx context.Context, repoID string) (Version, error) {
	v, err := s.d.Store.CurrentEnvironment(ctx, repoID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return Version{EnvironmentVersion: store.EnvironmentVersion{RepoID: repoID}}, nil
	}
	if err != nil {
		return Version{}, err
	}
	c, err := Parse([]byte(v.Config))
	return Version{v, c}, err
}

// atBuild returns the Repo's Variables available at build.
func (s *Service) atBuild(ctx context.Context, repoID string) ([]protocol.Variable, []AtBuild, error) {
	vars, err := s.d.Variables(ctx, repoID)
	if err != nil {
		return nil, nil, err
	}
	var pv []protocol.Variable
	var ab []AtBuild
	for _, v := range vars {
		if v.AtBuild {
			pv = append(pv, v)
			ab = append(ab, AtBuild{v.Name, v.Value})
		}
	}
	return pv, ab, nil
}

// Show returns a Repo's Environment: its current version and its draft.
func (s *Service) Show(ctx context.Context, repoID string) (View, error) {
	cur, err := s.current(ctx, repoID)
	if err != nil {
		return View{}, err
	}
	v := View{RepoID: repoID, Current: cur}
	d, err := s.d.Store.Draft(ctx, repoID)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return v, nil
	case err != nil:
		return View{}, err
	}
	c, err := Parse([]byte(d.Config))
	if err != nil {
		return View{}, err
	}
	pv, vars, err := s.atBuild(ctx, repoID)
	if err != nil {
		return View{}, err
	}
	digest := c.BuildDigest(vars)
	draft := &Draft{EnvironmentDraft: d, Settings: c, Changes: Changes(cur.Settings, c), digest: digest, vars: pv}
	if d.SourcePath != "" {
		plan, err := s.d.Store.PlanFileVariables(ctx, repoID, d.SourcePath, d.Variables)
		if err != nil {
			return View{}, err
		}
		draft.Changes, draft.kept = append(draft.Changes, plan.Changes(d.SourcePath)...), plan.Kept
	}
	draft.NeedsTest = digest != cur.buildBase(vars)
	if t, err := s.d.Store.LatestTestBuild(ctx, repoID, digest); err == nil {
		draft.Test = &t
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return View{}, err
	}
	v.Draft = draft
	return v, nil
}

// buildBase is the digest a draft's build inputs are held against: the
// one recorded with the version, so a Variable available at build changed
// since then needs a Test build too.
func (cur Version) buildBase(vars []AtBuild) string {
	if cur.Version == 0 {
		return Config{}.BuildDigest(vars)
	}
	return cur.BuildDigest
}

// Source names the file a draft was made from, such as the Repo's
// devcontainer.json, what was left out of it, and the Variables it
// proposes.
type Source struct {
	Path, Commit string
	Notes        []string
	Variables    []store.FileVariable
}

// Source is what the draft was made from; the zero Source for a draft a
// person wrote. Its notes end with the file's Variables that applying it
// would leave as they are, and why.
func (d Draft) Source() Source {
	src := Source{Path: d.SourcePath, Commit: d.SourceCommit, Variables: d.Variables}
	if d.Notes != "" {
		src.Notes = strings.Split(d.Notes, "\n")
	}
	for _, k := range d.kept {
		src.Notes = append(src.Notes, "containerEnv, remoteEnv: "+k)
	}
	return src
}

// Edit makes c the Repo's draft, from its current version.
func (s *Service) Edit(ctx context.Context, repoID string, c Config, by string) (View, error) {
	return s.EditFrom(ctx, repoID, c, by, Source{})
}

// EditFrom is Edit for a draft made from src.
func (s *Service) EditFrom(ctx context.Context, repoID string, c Config, by string, src Source) (View, error) {
	if err := c.Check(); err != nil {
		return View{}, err
	}
	cur, err := s.current(ctx, repoID)
	if err != nil {
		return View{}, err
	}
	d := store.EnvironmentDraft{RepoID: repoID, BaseVersion: cur.Version, Config: c.JSON(), UpdatedBy: by,
		SourcePath: src.Path, SourceCommit: src.Commit, Notes: strings.Join(src.Notes, "\n"), Variables: src.Variables}
	if _, err := s.d.Store.SaveDraft(ctx, d); err != nil {
		return View{}, err
	}
	return s.Show(ctx, repoID)
}

// Apply makes the Repo's draft its next version. A draft that changes the
// Build is refused until a Test build of exactly its build inputs passed.
func (s *Service) Apply(ctx context.Context, repoID, by string) (Version, error) {
	v, err := s.Show(ctx, repoID)
	if err != nil {
		return Version{}, err
	}
	d := v.Draft
	switch {
	case d == nil:
		return Version{}, fmt.Errorf("the Repo's Environment has no draft to apply: make one with kndl env edit: %w", errdefs.ErrNotFound)
	case len(d.Changes) == 0:
		return Version{}, fmt.Errorf("the draft changes nothing from version %d: %w", v.Current.Version, errdefs.ErrConflict)
	case d.NeedsTest && d.Test == nil:
		return Version{}, fmt.Errorf("the draft changes the Build, so it applies only after a Test build of it passes: run kndl env test: %w", errdefs.ErrConflict)
	case d.NeedsTest && d.Test.State == store.TestRunning:
		return Version{}, fmt.Errorf("the draft's Test build %s is still running: apply once it passes: %w", d.Test.ID, errdefs.ErrConflict)
	case d.NeedsTest && d.Test.State != store.TestPassed:
		return Version{}, fmt.Errorf("the draft's Test build %s failed (%s): fix the draft and test it again: %w", d.Test.ID, d.Test.Detail, errdefs.ErrConflict)
	}
	// The store adds the lines of the file's Variables as it sets them.
	next := store.EnvironmentVersion{RepoID: repoID, Config: d.Settings.JSON(), BuildDigest: d.digest,
		Changes: strings.Join(Changes(v.Current.Settings, d.Settings), "\n"), CreatedBy: by}
	if !d.NeedsTest && v.Current.Version > 0 {
		next.BuildVersion = v.Current.BuildVersion // the Build is as it was
	}
	applied, err := s.d.Store.ApplyDraft(ctx, next, d.BaseVersion)
	if err != nil {
		return Version{}, err
	}
	return Version{applied, d.Settings}, nil
}

// Log returns a Repo's change log: its versions, newest first.
func (s *Service) Log(ctx context.Context, repoID string) ([]Version, error) {
	vs, err := s.d.Store.EnvironmentVersions(ctx, repoID)
	if err != nil {
		return nil, err
	}
	out := make([]Version, 0, len(vs))
	for _, v := range vs {
		c, err := Parse([]byte(v.Config))
		if err != nil {
			return nil, err
		}
		out = append(out, Version{v, c})
	}
	return out, nil
}

// Test starts a Test build of the Repo's draft on a Runner the person may
// use and returns it running; its log and result reach the store as the
// Runner sends them.
func (s *Service) Test(ctx context.Context, repo store.Repo, userID string) (store.TestBuild, error) {
	v, err := s.Show(ctx, repo.ID)
	if err != nil {
		return store.TestBuild{}, err
	}
	if v.Draft == nil {
		return store.TestBuild{}, fmt.Errorf("the Repo's Environment has no draft to test: make one with kndl env edit: %w", errdefs.ErrNotFound)
	}
	clone, err := s.d.CloneToken(ctx, repo.URL)
	if err != nil {
		return store.TestBuild{}, fmt.Errorf("the Test build clones the Repo with the GitHub App's read-only token, and none was minted (is the App installed on %s?): %w", repo.URL, err)
	}
	runnerID, rc, err := s.d.PickRunner(ctx, userID)
	if err != nil {
		return store.TestBuild{}, err
	}
	d := v.Draft
	t, err := s.d.Store.CreateTestBuild(ctx, store.TestBuild{ID: uuid.NewString(), RepoID: repo.ID,
		BuildDigest: d.digest, RunnerID: runnerID, StartedBy: userID})
	if err != nil {
		return store.TestBuild{}, err
	}
	req := protocol.EnvTest{TestID: t.ID, RepoURL: repo.URL, Environment: d.Settings.protocol(0), Variables: d.vars, CloneToken: clone}
	if !s.life.Go(func(life context.Context) { s.run(life, t, req, rc) }) {
		s.end(ctx, t, errors.New(stopped))
		return store.TestBuild{}, fmt.Errorf("the Hub is stopping: run the Test build again once it is back: %w", errdefs.ErrUnavailable)
	}
	return t, nil
}

// run waits for a Test build's reply, within testTimeout and the
// Service's life, and records its result.
func (s *Service) run(life context.Context, t store.TestBuild, req protocol.EnvTest, rc Requester) {
	ctx, cancel := context.WithTimeout(life, testTimeout)
	defer cancel()
	err := rc.Request(ctx, protocol.TypeEnvTest, req, nil)
	if err != nil && life.Err() != nil {
		err = errors.New(stopped)
	}
	// The result is written though the wait was cut short: Close waits
	// for it, and a build left running would say so until the next start.
	s.end(context.WithoutCancel(ctx), t, err)
}

// end records a Test build's result: passed, or failed for err.
func (s *Service) end(ctx context.Context, t store.TestBuild, err error) {
	state, detail := store.TestPassed, ""
	if err != nil {
		state, detail = store.TestFailed, s.d.Redact(ctx, t.RepoID, err.Error())
	}
	if err := s.d.Store.EndTestBuild(ctx, t.ID, state, detail); err != nil {
		s.d.Log.Error("record a Test build's result", "test", t.ID, "err", err)
	}
}

// TestLog takes a Test build's lines from the Runner running it; lines
// for a Test build of another Runner are refused. Lines may come after
// the reply that ended it (they travel apart), and are kept.
func (s *Service) TestLog(ctx context.Context, runnerID string, m protocol.EnvTestLog) error {
	t, err := s.testOf(ctx, runnerID, m.TestID)
	if err != nil {
		return err
	}
	// The batch is redacted whole, once: Redact opens the Repo's Sensitive
	// values, and a value split over lines is found too.
	return s.d.Store.AppendTestLog(ctx, t.ID, s.d.Redact(ctx, t.RepoID, strings.Join(m.Lines, "\n")+"\n"))
}

// testOf returns a Test build that runs on runnerID; any other reads as
// one that does not exist.
func (s *Service) testOf(ctx context.Context, runnerID, id string) (store.TestBuild, error) {
	t, err := s.d.Store.TestBuildByID(ctx, id)
	if err != nil || t.RunnerID != runnerID {
		return store.TestBuild{}, fmt.Errorf("no Test build %s of this Runner: %w", id, errdefs.ErrNotFound)
	}
	return t, nil
}

// TestBuild returns one of a Repo's Test builds.
func (s *Service) TestBuild(ctx context.Context, repoID, id string) (store.TestBuild, error) {
	return s.d.Store.TestBuild(ctx, repoID, id)
}

// ForStart returns what a Session starts on: its Repo's current version,
// recorded as the Session's. Nil is the Runner's defaults.
func (s *Service) ForStart(ctx context.Context, sessionID, repoID string) (*protocol.Environment, error) {
	cur, err := s.current(ctx, repoID)
	if err != nil {
		return nil, err
	}
	if err := s.d.Store.SetSessionEnvironment(ctx, sessionID, cur.Version); err != nil {
		return nil, err
	}
	if cur.Version == 0 {
		return nil, nil
	}
	e := cur.Settings.protocol(cur.Version)
	return &e, nil
}

// Reserves returns the CPUs and memory a Session of the Repo asks for:
// its current version's; zero is none, the Runner's caps.
func (s *Service) Reserves(ctx context.Context, repoID string) (cpus float64, memoryMiB int, err error) {
	cur, err := s.current(ctx, repoID)
	return cur.Settings.CPUs, cur.Settings.MemoryMiB, err
}

// OfSession says which version a Session runs on, and the newer one that
// waits for its next wake or restart (0 when none).
func (s *Service) OfSession(ctx context.Context, sessionID, repoID string) (on, waiting int, err error) {
	if on, err = s.d.Store.SessionEnvironment(ctx, sessionID); err != nil {
		return 0, 0, err
	}
	cur, err := s.current(ctx, repoID)
	if err != nil {
		return 0, 0, err
	}
	if cur.Version > on {
		waiting = cur.Version
	}
	return on, waiting, nil
}

// CheckOf returns the check command of the version a Session runs on,
// "" when it names none.
func (s *Service) CheckOf(ctx context.Context, sessionID, repoID string) (string, error) {
	c, err := s.sessionConfig(ctx, sessionID, repoID)
	return c.CheckCommand, err
}

// PortsOf returns the ports version of the Repo's Environment offers in
// a Session's view, with their labels: none for version 0, the Runner's
// defaults. A version is never changed once saved, so its ports are read
// once and kept (a standby taking over reads each once, not once for each
// of its thousands of watchers).
func (s *Service) PortsOf(ctx context.Context, repoID string, version int) ([]protocol.OfferedPort, error) {
	if version == 0 {
		return nil, nil
	}
	key := versionKey{repoID, version}
	s.portsMu.Lock()
	ps, ok := s.ports[key]
	s.portsMu.Unlock()
	if ok {
		return ps, nil
	}
	v, err := s.d.Store.EnvironmentVersion(ctx, repoID, version)
	if err != nil {
		return nil, err
	}
	c, err := Parse([]byte(v.Config))
	if err != nil {
		return nil, err
	}
	s.portsMu.Lock()
	if len(s.ports) >= maxKeptPorts {
		clear(s.ports)
	}
	s.ports[key] = c.Ports
	s.portsMu.Unlock()
	return c.Ports, nil
}

// versionKey names one version of a Repo's Environment.
type versionKey struct {
	repo    string
	version int
}

// maxKeptPorts bounds the versions whose ports are kept: past it they are
// all let go and read again as asked.
const maxKeptPorts = 4096

// sessionConfig is the Config of the version a Session last started on,
// the zero Config for the Runner's defaults.
func (s *Service) sessionConfig(ctx context.Context, sessionID, repoID string) (Config, error) {
	on, err := s.d.Store.SessionEnvironment(ctx, sessionID)
	if err != nil || on == 0 {
		return Config{}, err
	}
	v, err := s.d.Store.EnvironmentVersion(ctx, repoID, on)
	if err != nil {
		return Config{}, err
	}
	return Parse([]byte(v.Config))
}

// protocol is c as the Runner takes it, without the ports the Hub alone
// offers in the view.
func (c Config) protocol(version int) protocol.Environment {
	c.Ports = nil
	return protocol.Environment{Version: version, EnvironmentSettings: protocol.EnvironmentSettings(c)}
}
