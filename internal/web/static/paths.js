// Every path of the Hub's API the pages' scripts call, each written once
// here (tests/style refuses an /api/ path in any other script). Each id is
// escaped into its one segment.

const seg = encodeURIComponent;

export const sessions = "/api/sessions";
// attempts starts an attempt set: one prompt as several Sessions.
export const attempts = "/api/attempts";
// keepAttempt keeps one attempt of a set; the others sleep or are archived.
export const keepAttempt = (set) => `${attempts}/${seg(set)}/keep`;
// sessionsLive is the Sessions list's WebSocket.
export const sessionsLive = "/api/sessions/live";
export const session = (id) => `/api/sessions/${seg(id)}`;
// sessionLive is a Session's WebSocket, from the Event after seq.
export const sessionLive = (id, after) => `${session(id)}/live?after=${after}`;
// act is one of a Session's actions: sleep, wake, restart, archive,
// restore or stop-turn.
export const act = (id, action) => `${session(id)}/${action}`;
export const keepAwake = (id) => `${session(id)}/keep-awake`;
export const threadContext = (id) => `${session(id)}/thread-context`;
export const prompts = (id) => `${session(id)}/prompts`;
export const prompt = (id, promptID) => `${prompts(id)}/${seg(promptID)}`;
export const movePrompt = (id, p) => `${prompt(id, p)}/move`;
export const answer = (id) => `${session(id)}/answer`;
export const stopSubagent = (id, agent) => `${session(id)}/subagents/${seg(agent)}/stop`;
// pulls opens a pull request from a branch the Session pushed.
export const pulls = (id) => `${session(id)}/pulls`;
// fork makes a new Session from a copy of this one; forks lists its
// parent and its forks.
export const fork = (id) => `${session(id)}/fork`;
export const forks = (id) => `${session(id)}/forks`;
// egress answers a host the Session's allowlist refused: "allow" or
// "request".
export const egress = (id, what) => `${session(id)}/egress/${what}`;
// file is a file of the Session's /workspace, by its path there.
export const file = (id, path) => `${session(id)}/files/${path.split("/").map(seg).join("/")}`;
// changes is a Session's Workspace's changes (the Changes tab).
export const changes = (id) => `${session(id)}/changes`;
export const attachments = (id) => `${session(id)}/attachments`;
// upload takes a file's bytes as the body, the name in the query.
export const upload = (id, name) => `${attachments(id)}?name=${seg(name)}`;
export const attachment = (id, attachmentID) => `${attachments(id)}/${seg(attachmentID)}`;

// models is what a Session may run: what every Runner the person may use
// takes.
export const models = "/api/models";

export const claudeToken = "/api/account/claude-token";
export const webhooks = "/api/account/webhooks";
export const webhook = (id) => `${webhooks}/${seg(id)}`;

export const runners = "/api/runners";
export const runner = (id) => `${runners}/${seg(id)}`;
export const runnerShared = (id) => `${runner(id)}/shared`;

export const invites = "/api/invites";
export const invite = (id) => `${invites}/${seg(id)}`;
export const member = (id) => `/api/members/${seg(id)}`;

export const mcpServers = "/api/mcp/servers";
export const mcpServer = (id) => `${mcpServers}/${seg(id)}`;
// mcpServerDryRun says whose values an edit would clear, saving nothing.
export const mcpServerDryRun = (id) => `${mcpServer(id)}?dry_run=1`;
export const installations = "/api/mcp/installations";
export const installation = (id) => `${installations}/${seg(id)}`;
export const installationSecret = (id, key) => `${installation(id)}/secrets/${seg(key)}`;
export const installationConnect = (id) => `${installation(id)}/connect`;

const repo = (id) => `/api/repos/${seg(id)}`;
// installationOff is an Installation's switch in a Repo: PUT turns it off,
// DELETE back on.
export const installationOff = (repoID, id) => `${repo(repoID)}/mcp/${seg(id)}/off`;
export const autoFix = (repoID) => `${repo(repoID)}/auto-fix`;
export const triggerLabel = (repoID) => `${repo(repoID)}/trigger-label`;
export const environment = (repoID) => `${repo(repoID)}/environment`;
export const repoLimits = (repoID) => `${repo(repoID)}/limits`;
export const environmentDraft = (repoID) => `${environment(repoID)}/draft`;
export const environmentDevcontainer = (repoID) => `${environmentDraft(repoID)}/devcontainer`;
export const environmentTests = (repoID) => `${environment(repoID)}/tests`;
export const environmentTest = (repoID, id) => `${environmentTests(repoID)}/${seg(id)}`;
export const environmentApply = (repoID) => `${environment(repoID)}/apply`;
export const environmentLog = (repoID) => `${environment(repoID)}/log`;
