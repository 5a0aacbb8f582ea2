// claudemesh's MCP server (claudemesh-mcp) driven by a third-party client:
// the official TypeScript SDK's, as other agents' hosts drive it. A real
// daemon, started here in a fresh HOME with the embedded broker, serves
// the sessions. claudemesh and claudemesh-mcp must be on PATH (.ci/run
// builds them). Run: npm ci && node --test.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import Ajv2020 from 'ajv/dist/2020.js';

// The deadline of a wait for something the daemon does (a peer joining, a
// message landing), not a measure of its speed.
const WAIT_MS = 20_000;

let root, home, repo;
const clients = [];

// environ is the environment of a claudemesh process: the fresh HOME and
// its daemon and config directories, nothing claudemesh or Claude Code
// set for the process running the tests.
function environ(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('CLAUDEMESH_') && !k.startsWith('CLAUDE_CODE_')) env[k] = v;
  }
  return { ...env, HOME: home, CLAUDEMESH_DAEMON_DIR: join(home, 'd'), CLAUDEMESH_CONFIG_DIR: join(home, 'c'), ...extra };
}

function claudemesh(...args) {
  return execFileSync('claudemesh', args, { env: environ(), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

before(() => {
  root = mkdtempSync(join(tmpdir(), 'cmnode-'));
  home = join(root, 'h');
  repo = join(root, 'repo'); // reservations and locks are a git repository's
  execFileSync('git', ['init', '-q', repo]);
  execFileSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@example.invalid', 'commit', '-q', '--allow-empty', '-m', 'root']);
  claudemesh('daemon', 'up', '--no-tcp'); // answers once the daemon serves
});

after(async () => {
  for (const c of clients) await c.close().catch(() => {});
  try {
    claudemesh('daemon', 'down');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

// connect starts claudemesh-mcp --name name in the repository and connects
// to it; capabilities are the client's (none: a generic client, which
// takes neither claude/channel nor logs), tools the tool set it serves
// (absent: claudemesh's own).
async function connect(name, { capabilities = {}, env = {}, tools } = {}) {
  const args = ['--name', name, ...(tools ? ['--tools', tools] : [])]; // tools: the set served (--tools agent-mail)
  const transport = new StdioClientTransport({
    command: 'claudemesh-mcp', args, env: environ(env), cwd: repo, stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr.on('data', (d) => { stderr += d; });
  const client = new Client({ name: 'claudemesh-node-test', version: '1' }, { capabilities });
  await client.connect(transport);
  client.stderrText = () => stderr;
  clients.push(client);
  return client;
}

async function waitFor(what, cond, ms = WAIT_MS) {
  const until = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > until) assert.fail(`no ${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.ok(!res.isError, `${name}(${JSON.stringify(args)}): ${res.content?.[0]?.text}`);
  return res.structuredContent;
}

async function waitPeer(client, name) {
  await waitFor(`peer ${name}`, async () => {
    const res = await client.callTool({ name: 'list_peers', arguments: {} });
    return !res.isError && res.structuredContent.peers.some((p) => p.name === name);
  });
}

// updates collects the URIs of a client's notifications/resources/updated.
function updates(client) {
  const seen = [];
  const waiters = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    seen.push(n.params.uri);
    for (const w of waiters.splice(0)) w();
  });
  return {
    seen,
    // next resolves with the next update of uri, or fails after ms.
    next(uri, ms) {
      const from = seen.length;
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no notifications/resources/updated for ${uri} within ${ms} ms`)), ms);
        const check = () => {
          if (seen.slice(from).includes(uri)) {
            clearTimeout(timer);
            resolve();
          } else waiters.push(check);
        };
        check();
      });
    },
  };
}

async function readJSON(client, uri) {
  const res = await client.readResource({ uri });
  assert.equal(res.contents.length, 1);
  assert.equal(res.contents[0].mimeType, 'application/json');
  return JSON.parse(res.contents[0].text);
}

// What every tool is called with, in this order, by one agent (alice)
// while another (bob) sends to it: args (of the calls so far, ctx), a
// setup to run first, what to keep of the result, or refused: why the
// call is expected to be refused. A tool the server lists without an
// entry here fails the test: a new tool adds its entry.
const TOOLS = {
  set_status: { args: () => ({ status: 'idle', summary: 'testing the MCP server' }) }, // working would hold bob's next messages
  set_summary: { args: () => ({ summary: 'testing the MCP server' }) },
  list_peers: { args: () => ({}) },
  whois: { args: () => ({ name: 'bob' }) },
  health_check: { args: () => ({}) },
  start_session: { args: () => ({ patterns: ['docs/**'], summary: 'reading the docs' }) },
  set_contact_policy: { args: () => ({ policy: 'contacts_only' }) },
  list_contacts: {
    args: () => ({}),
    async setup(ctx) {
      // bob is no contact of alice's: his message waits as a request.
      await call(ctx.bob, 'send_message', { to: 'alice', message: 'hello alice', thread_id: 'thread-1', ack_required: true });
      await waitFor('a contact request from bob', async () => {
        const res = await ctx.alice.callTool({ name: 'list_contacts', arguments: {} });
        return res.structuredContent?.requests?.length === 1;
      });
    },
  },
  answer_contact_request: { args: () => ({ peer: 'bob', accept: true }) },
  send_message: { args: () => ({ to: 'bob', message: 'hello bob', subject: 'hi', importance: 'high' }) },
  fetch_inbox: { args: () => ({ limit: 10, urgent_only: false, include_read: true }) },
  check_messages: { args: () => ({ limit: 10 }), keep: (ctx, out) => { ctx.messageID = out.messages[0]?.id; } },
  mark_read: { args: (ctx) => ({ ids: [ctx.messageID] }) },
  reply_message: { args: (ctx) => ({ id: ctx.messageID, message: 'thanks, bob' }) },
  search_messages: { args: () => ({ query: 'hello' }) },
  get_thread: { args: () => ({ thread_id: 'thread-1' }) },
  list_unacknowledged: { args: () => ({}) },
  acknowledge_message: { args: (ctx) => ({ id: ctx.messageID }) },
  list_awaiting_acks: { args: () => ({}) },
  topic_create: { args: () => ({ name: 'builds', description: 'build results' }) },
  topic_list: { args: () => ({}) },
  topic_join: { args: () => ({ topic: 'builds', role: 'member' }) },
  topic_members: { args: () => ({ topic: 'builds' }) },
  topic_history: { args: () => ({ topic: '#builds', limit: 5 }) },
  topic_leave: { args: () => ({ topic: 'builds' }) },
  state_set: { args: () => ({ key: 'release', value: { owner: 'alice' } }) },
  state_get: { args: () => ({ key: 'release' }) },
  state_list: { args: () => ({}) },
  remember: { args: () => ({ content: 'the build uses Go 1.26', tags: ['build'] }), keep: (ctx, out) => { ctx.memoryID = out.id; } },
  recall: { args: () => ({ query: 'build' }) },
  forget: { args: (ctx) => ({ id: ctx.memoryID }) },
  skill_list: { args: () => ({}) },
  skill_get: { args: () => ({ name: 'deploy' }), refused: 'the mesh has no skill yet' },
  skill_publish: { args: () => ({ name: 'review', content: 'read every diff twice', description: 'how we review', tags: ['code'] }) },
  lock_acquire: { args: () => ({ key: 'file:src/lib.rs' }) },
  lock_list: { args: () => ({}) },
  lock_release: { args: () => ({ key: 'file:src/lib.rs' }) },
  reserve_files: { args: () => ({ patterns: ['src/**'] }) },
  list_reservations: { args: () => ({}) },
  release_files: { args: () => ({ patterns: ['src/**'] }) },
  guard_install: { args: () => ({ offline: 'allow' }) }, // in the test's repository
};

// The Agent Mail set's tools (claudemesh-mcp --tools agent-mail), called
// with Agent Mail's arguments by one agent (amalice) while another
// (ambob, claudemesh's own set) sends to it, as TOOLS are.
const AGENT_MAIL_TOOLS = {
  health_check: { args: () => ({ format: 'json' }) },
  ensure_project: { args: () => ({ human_key: repo }) },
  register_agent: { args: () => ({ project_key: repo, program: 'node-test', model: 'none', name: 'GreenCastle', task_description: 'testing Agent Mail names' }) },
  macro_start_session: { args: () => ({ human_key: repo, program: 'node-test', model: 'none', file_reservation_paths: ['notes/**'], inbox_limit: 5 }) },
  list_peers: { args: () => ({}) },
  whois: { args: () => ({ project_key: repo, agent_name: 'ambob' }) },
  send_message: { args: () => ({ project_key: repo, sender_name: 'GreenCastle', to: ['ambob'], cc: ['ambob'], subject: 'plan', body_md: 'see the plan', importance: 'low' }) },
  fetch_inbox: {
    args: () => ({ project_key: repo, agent_name: 'GreenCastle', include_bodies: true, limit: 5 }),
    async setup(ctx) {
      await call(ctx.bob, 'send_message', { to: 'amalice', message: 'the plan is ready', subject: 'plan', ack_required: true });
      await waitFor('ambob\'s message in fetch_inbox', async () => {
        const res = await ctx.alice.callTool({ name: 'fetch_inbox', arguments: { project_key: repo, agent_name: 'GreenCastle' } });
        return res.structuredContent?.messages?.length === 1;
      });
    },
    keep: (ctx, out) => { ctx.messageID = out.messages[0]?.id; },
  },
  reply_message: { args: (ctx) => ({ project_key: repo, message_id: ctx.messageID, sender_name: 'GreenCastle', body_md: 'on it', subject_prefix: 'Re:' }) },
  mark_message_read: { args: (ctx) => ({ project_key: repo, agent_name: 'GreenCastle', message_id: ctx.messageID }) },
  acknowledge_message: { args: (ctx) => ({ project_key: repo, agent_name: 'GreenCastle', message_id: ctx.messageID }) },
  search_messages: { args: () => ({ project_key: repo, query: 'plan', limit: 5 }) },
  fetch_topic: { args: () => ({ project_key: repo, topic_name: 'no-such-topic' }), refused: 'the mesh has no such topic' },
  file_reservation_paths: { args: () => ({ project_key: repo, agent_name: 'GreenCastle', paths: ['lib/**'], ttl_seconds: 600, exclusive: true, reason: 'bd-1' }) },
  renew_file_reservations: { args: () => ({ project_key: repo, agent_name: 'GreenCastle', extend_seconds: 600 }) },
  release_file_reservations: { args: () => ({ project_key: repo, agent_name: 'GreenCastle', paths: ['lib/**'] }) },
  install_precommit_guard: { args: () => ({ project_key: repo, code_repo_path: repo }) },
  uninstall_precommit_guard: { args: () => ({ code_repo_path: repo }) },
  set_contact_policy: { args: () => ({ project_key: repo, agent_name: 'GreenCastle', policy: 'open' }) },
  list_contacts: { args: () => ({ project_key: repo, agent_name: 'GreenCastle' }) },
  respond_contact: { args: () => ({ project_key: repo, to_agent: 'GreenCastle', from_agent: 'ambob', accept: true }), refused: 'no contact request is pending' },
};

test('every tool of both sets has strict JSON Schemas, a description on every property, and its behaviour hints', async () => {
  const problems = [];
  for (const set of [undefined, 'agent-mail']) {
    const { tools } = await (await connect(`schemas-${set ?? 'own'}`, { tools: set })).listTools();
    assert.ok(tools.length > 0);
    lintTools(tools, problems);
  }
  assert.deepEqual(problems, []);
});

// lintTools adds to problems what a strict client refuses of tools.
function lintTools(tools, problems) {
  for (const tool of tools) {
    for (const [what, schema] of [['input', tool.inputSchema], ['output', tool.outputSchema]]) {
      // Strict: unknown keywords, keywords of a type the schema does not
      // declare, union types (but for T or null, which lint refuses) ...
      const ajv = new Ajv2020({ strict: true, allErrors: true });
      try {
        ajv.compile(schema);
      } catch (err) {
        problems.push(`${tool.name} ${what} schema: ${err.message}`);
      }
      lint(schema, `${tool.name} ${what}`, problems);
    }
    const a = tool.annotations ?? {};
    for (const hint of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint']) {
      if (typeof a[hint] !== 'boolean') problems.push(`${tool.name}: no ${hint}`);
    }
  }
}

// lint adds to problems each schema below schema with several types
// (["null", "array"], which the MCP Inspector's --strict warns of) and
// each property without a description.
function lint(schema, path, problems) {
  if (Array.isArray(schema?.type)) problems.push(`${path}: type ${JSON.stringify(schema.type)}, want one`);
  for (const [name, p] of Object.entries(schema?.properties ?? {})) {
    if (!p.description) problems.push(`${path}.${name} has no description`);
    lint(p, `${path}.${name}`, problems);
  }
  if (schema?.items) lint(schema.items, `${path}[]`, problems);
}

test('every tool answers, its structured result valid against its output schema', async () => {
  const ctx = { alice: await connect('alice'), bob: await connect('bob') };
  await waitPeer(ctx.bob, 'alice');
  await waitPeer(ctx.alice, 'bob');
  await callEvery(ctx, TOOLS);
  assert.ok(ctx.messageID, 'check_messages returned bob\'s message once alice accepted his request');
});

test('every tool of the Agent Mail set answers with Agent Mail\'s arguments', async () => {
  const ctx = { alice: await connect('amalice', { tools: 'agent-mail' }), bob: await connect('ambob') };
  await waitPeer(ctx.bob, 'amalice');
  await waitPeer(ctx.alice, 'ambob');
  await callEvery(ctx, AGENT_MAIL_TOOLS);
  assert.ok(ctx.messageID, 'fetch_inbox returned ambob\'s message');
});

// callEvery calls every tool ctx.alice lists, as table says, in its order;
// a tool the server lists without an entry, or an entry of a tool it does
// not list, fails.
async function callEvery(ctx, table) {
  const { tools } = await ctx.alice.listTools(); // the client now validates each result against its tool's output schema
  const order = Object.keys(table);
  const missing = tools.map((t) => t.name).filter((n) => !order.includes(n));
  assert.deepEqual(missing, [], 'tools with no entry in TOOLS (add one: its arguments)');
  const listed = new Set(tools.map((t) => t.name));
  assert.deepEqual(order.filter((n) => !listed.has(n)), [], 'entries of TOOLS the server does not list');
  for (const name of order) {
    const entry = table[name];
    if (entry.setup) await entry.setup(ctx);
    const args = entry.args(ctx);
    const res = await ctx.alice.callTool({ name, arguments: args });
    const text = res.content?.map((c) => c.text).join('\n') ?? '';
    if (entry.refused) {
      assert.ok(res.isError, `${name}: expected a refusal (${entry.refused}), got ${text}`);
      assert.doesNotMatch(text, /validating|\/properties\//, `${name}: the validator's words`);
      continue;
    }
    assert.ok(!res.isError, `${name}(${JSON.stringify(args)}): ${text}`);
    assert.ok(text.length > 0, `${name}: no text`);
    entry.keep?.(ctx, res.structuredContent);
  }
}

test('a generic client is told of a message by a resource update within 1 s', async () => {
  const carol = await connect('carol'); // no claude/channel, no log level
  const bob = await connect('bob2');
  const seen = updates(carol);
  await carol.subscribeResource({ uri: 'inbox://messages' });
  await assert.rejects(carol.subscribeResource({ uri: 'inbox://nothing' }), /no resource/);
  await waitPeer(bob, 'carol');
  const told = seen.next('inbox://messages', 1000); // a deadline, counted from the send
  await call(bob, 'send_message', { to: 'carol', message: 'are you there?' });
  await told;
  const inbox = await readJSON(carol, 'inbox://messages');
  assert.deepEqual(inbox.messages.map((m) => [m.from, m.body]), [['bob2', 'are you there?']]);
  const { resources } = await carol.listResources();
  assert.deepEqual(resources.map((r) => r.uri).sort(), ['inbox://messages', 'inbox://peers', 'inbox://reservations']);
});

test('a client killed after the push was written, before it read, leaves the message unread', async () => {
  const session = { CLAUDE_CODE_SESSION_ID: randomUUID() };
  const dave = await connect('dave', { env: session });
  const bob = await connect('bob3');
  const seen = updates(dave);
  await dave.subscribeResource({ uri: 'inbox://messages' });
  await waitPeer(bob, 'dave');
  const told = seen.next('inbox://messages', WAIT_MS);
  await call(bob, 'send_message', { to: 'dave', message: 'read me later' });
  await told;
  await dave.close(); // the server is ended before anything was read

  const again = await connect('dave', { env: session }); // the same session, reconnecting
  const inbox = await readJSON(again, 'inbox://messages');
  assert.deepEqual(inbox.messages.map((m) => m.body), ['read me later']);
  const read = await call(again, 'check_messages', {});
  assert.deepEqual(read.messages.map((m) => m.body), ['read me later']);
});
