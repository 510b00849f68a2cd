#!/usr/bin/env node
// Smoke test of the A2A peers: starts python/a2a_echo_server.py and js/a2a_echo_server.mjs
// (127.0.0.1, port 0), checks both listen on loopback only, then drives each with both
// clients (python/a2a_client.py, js/a2a_client.mjs) over JSON-RPC and HTTP+JSON at protocol
// 1.0 and 0.3 (16 runs), checks the reports, stops everything, and ends with
// "N passed, M failed" (exit 0 only if none failed).
//
//   node tests/peers/js/a2a_smoke.mjs [--keep-reports DIR]
//
// Needs scripts/install-test-peers to have run (tests/peers/.venv, tests/peers/node_modules).

import { spawn, execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const PEERS = path.dirname(HERE);
const PYTHON = path.join(PEERS, '.venv', 'bin', 'python');
const NODE = process.execPath;
const keepIdx = process.argv.indexOf('--keep-reports');
const KEEP = keepIdx > 0 ? process.argv[keepIdx + 1] : null;

let passed = 0;
let failed = 0;
function check(label, cond, detail) {
  if (cond) {
    passed++;
    console.log(`ok   ${label}`);
  } else {
    failed++;
    console.log(`FAIL ${label}${detail ? `: ${detail}` : ''}`);
  }
}

function startServer(cmd, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`${args[0]}: no LISTENING line in 15 s; stderr: ${err}`)), 15000);
    child.stderr.on('data', (d) => { err += d; });
    child.stdout.on('data', (d) => {
      out += d;
      const m = /LISTENING (\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1] });
      }
    });
    child.on('exit', (code) => reject(new Error(`${args[0]} exited ${code}; stderr: ${err}`)));
  });
}

async function runClient(kind, url, transport, version) {
  const actions = ['--send', 'hello', '--get', '--stream', 'slow s', '--send', 'ask q', '--continue', '42',
    '--stream-cancel', 'slow c', '--return-immediately', '--send', 'slow ri', '--cancel', '--list'];
  const common = ['--card-url', url, '--transport', transport, '--version', version, ...actions];
  const [cmd, args] = kind === 'py'
    ? [PYTHON, [path.join(PEERS, 'python', 'a2a_client.py'), ...common]]
    : [NODE, [path.join(HERE, 'a2a_client.mjs'), ...common]];
  const { stdout } = await execFileP(cmd, args, { maxBuffer: 64 * 1024 * 1024, timeout: 60000 });
  return JSON.parse(stdout);
}

function checkReport(label, r, version) {
  const [send, get, stream, ask, cont, scancel, ri, cancel, list] = r.actions;
  check(`${label} card+interface`, r.error === null && r.selected_interface?.protocol_version === version,
    JSON.stringify(r.error ?? r.selected_interface));
  if (r.error !== null) return;
  const probs = [];
  const want = (cond, what) => { if (!cond) probs.push(what); };
  want(send.state === 'TASK_STATE_COMPLETED' && send.artifacts[0] === 'echo: hello', `send ${send.state} ${send.artifacts}`);
  want(get.task_id === send.task_id && get.state === 'TASK_STATE_COMPLETED', `get ${get.state}`);
  want(stream.state === 'TASK_STATE_COMPLETED' && stream.artifacts[0] === 'echo: slow s'
    && stream.events.some((e) => e.state === 'TASK_STATE_WORKING' && e.text === 'working on: slow s'),
    `stream ${JSON.stringify(stream.events.map((e) => [e.kind, e.state]))}`);
  want(ask.state === 'TASK_STATE_INPUT_REQUIRED' && ask.status_message === 'question: what is your answer?', `ask ${ask.state}`);
  want(cont.task_id === ask.task_id && cont.context_id === ask.context_id && cont.state === 'TASK_STATE_COMPLETED'
    && cont.status_message === 'answered: 42' && cont.artifacts[0] === 'answered: 42', `continue ${cont.state} ${cont.status_message}`);
  want(scancel.state === 'TASK_STATE_CANCELED' && scancel.cancel_result?.state === 'TASK_STATE_CANCELED',
    `stream-cancel ${scancel.state} ${JSON.stringify(scancel.cancel_result)}`);
  want(ri.return_immediately === true && ['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING'].includes(ri.state), `return-immediately ${ri.state}`);
  want(cancel.task_id === ri.task_id && cancel.state === 'TASK_STATE_CANCELED', `cancel ${cancel.state} ${JSON.stringify(cancel.error)}`);
  if (version === '1.0') want(list.ok && list.tasks.length >= 1, `list ${JSON.stringify(list.error)}`);
  else want(!list.ok && list.error !== null, 'list at 0.3 should be refused by the client');
  check(`${label} actions`, probs.length === 0, probs.join('; '));
}

const servers = [];
try {
  const py = await startServer(PYTHON, [path.join(PEERS, 'python', 'a2a_echo_server.py'), '--port', '0']);
  servers.push(py);
  const js = await startServer(NODE, [path.join(HERE, 'a2a_echo_server.mjs'), '--port', '0']);
  servers.push(js);
  for (const [name, s] of [['py-server', py], ['js-server', js]]) {
    const r = await execFileP(NODE, [path.join(PEERS, 'check-loopback-only.cjs'), '--wait', '2000', String(s.child.pid)])
      .then((x) => ({ code: 0, out: x.stdout }), (e) => ({ code: e.code, out: e.stdout }));
    check(`${name} listens on loopback only (${s.url})`, r.code === 0, r.out.trim());
  }
  if (KEEP) mkdirSync(KEEP, { recursive: true });
  for (const [sname, s] of [['py-server', py], ['js-server', js]]) {
    for (const client of ['py', 'js']) {
      for (const [transport, version] of [['jsonrpc', '1.0'], ['rest', '1.0'], ['jsonrpc', '0.3'], ['rest', '0.3']]) {
        const label = `${client}-client -> ${sname} ${transport} ${version}`;
        try {
          const report = await runClient(client, s.url, transport, version);
          if (KEEP) writeFileSync(path.join(KEEP, `${client}-client_${sname}_${transport}_${version}.json`), JSON.stringify(report, null, 2));
          checkReport(label, report, version);
        } catch (err) {
          check(label, false, String(err?.stderr || err?.message || err).slice(0, 2000));
        }
      }
    }
  }
} catch (err) {
  check('start servers', false, String(err?.message ?? err));
} finally {
  for (const s of servers) s.child.kill('SIGTERM');
}
console.log(`${passed} passed, ${failed} failed`);
process.exitCode = failed === 0 ? 0 : 1;
