// Weak secrets (short, or one word or number) on the real server process, with the GitHub
// stand-in, real git and real terraform: the server warns at start and scrubs them only where
// they stand as a whole value, so what it writes stays readable and valid.
// - `--gh-webhook-secret false`: /status is valid JSON with `"shutting_down":false` (it was
//   `{"shutting_down":[REDACTED],...}`, so the controller took the pod as unreachable), and
//   every log line is valid JSON.
// - `--gh-webhook-secret atlantis` (the tutorials' secret): the PR's plan comment still says
//   `atlantis apply -d app1` (it said `[REDACTED] apply`), while the secret printed by terraform
//   as a value (`HOOK=atlantis`) is scrubbed.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { StatusBody } from '../src/contract/drain-protocol.js';
import type { CliProcess } from './support/cli.js';
import { childList } from './support/children.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

const envs: WorkflowEnv[] = [];
const procs = childList();
after(async () => {
  procs.killAll();
  for (const e of envs) await e.close();
});

async function serverWithSecret(secret: string, host: string): Promise<{ env: WorkflowEnv; p: CliProcess; url: string }> {
  const env = await createWorkflowEnv({ webhookSecret: secret });
  envs.push(env);
  const { p, url } = await startWorkflowServer(env, tempDataDir(), host);
  procs.push(p);
  return { env, p, url };
}

const leakTf = `resource "terraform_data" "x" {
  input = "v"
}

output "hook" {
  value = "HOOK=atlantis"
}
`;

describe('a weak secret is scrubbed only as a whole value', () => {
  it('--gh-webhook-secret false: /status and the log stay valid JSON; the server warns at start', async () => {
    const { p, url } = await serverWithSecret('false', '127.0.164.1');
    const text = await (await fetch(`${url}/status`)).text();
    const status = JSON.parse(text) as StatusBody;
    assert.equal(status.shutting_down, false, text);
    assert.equal(status.in_progress_operations, 0, text);
    p.child.kill('SIGTERM');
    assert.equal((await p.exited).code, 0);
    const lines = p
      .output()
      .split('\n')
      .filter((l) => l.trim() !== '');
    for (const l of lines) assert.doesNotThrow(() => JSON.parse(l), l);
    const warning = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.flag === '--gh-webhook-secret');
    assert.equal(warning?.level, 'warn', p.output());
    assert.equal(warning?.weakness, 'short');
    assert.match(String(warning?.msg), /scrubbed only where it stands as a whole value/);
    assert.ok(!p.output().includes(':[REDACTED]'), 'no JSON value was replaced by the text [REDACTED]');
  });

  it('--gh-webhook-secret atlantis: comments keep `atlantis apply`; the secret printed as a value is scrubbed', async () => {
    const { env, p, url } = await serverWithSecret('atlantis', '127.0.164.2');
    await env.openPull(url, 1, 'weak', { 'app1/main.tf': leakTf });
    const plan = (await env.waitForComment(1, /^Ran Plan for dir: `app1`/, { timeoutMs: 90_000 })).body;
    assert.match(plan, /^ {2}atlantis apply -d app1$/m, plan);
    assert.match(plan, /atlantis plan -d app1/);
    assert.ok(!plan.includes('[REDACTED] apply'), plan);
    assert.match(plan, /hook += "HOOK=\[REDACTED\]"/, plan);
    assert.ok(!plan.includes('HOOK=atlantis'), plan);
    const log = p.output();
    assert.match(log, /"flag":"--gh-webhook-secret","weakness":"word"/);
  });
});
