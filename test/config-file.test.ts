// `--config <file>` (src/config/config-file.ts): a YAML map of flag names, read as Atlantis reads
// it, with flags beating env beating the file beating defaults; its `webhooks:` list and
// --webhook-http-headers (src/server/notifications/apply-webhooks.ts); and bad files (unknown
// keys, wrong types, Slack webhooks): one clear line, exit 2, nothing started.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { parseFlagsWithConfigFile, readConfigFile } from '../src/config/config-file.js';
import { UsageError } from '../src/config/flags.js';
import type { Logger } from '../src/log.js';
import { buildServerConfig, SERVER_FLAGS } from '../src/server/config.js';
import { ApplyWebhooks, applyWebhookBody, parseWebhookHeaders, parseWebhookSettings } from '../src/server/notifications/apply-webhooks.js';
import { serverSecretValues } from '../src/server/secrets/server-secrets.js';
import { assertBuilt, runCli } from './support/cli.js';
import { requiredFlags } from './support/server-config.js';

const dir = mkdtempSync(path.join(tmpdir(), 'ato-config-file-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
function file(text: string): string {
  const f = path.join(dir, `config-${++n}.yaml`);
  writeFileSync(f, text);
  return f;
}
const usage = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof UsageError, `not a UsageError: ${(e as Error).message}`);
    return e.message;
  }
  assert.fail('no error');
};

describe('--config: which value wins', () => {
  const { flags } = requiredFlags('ato-config-file-');
  const cfg = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
    const p = parseFlagsWithConfigFile([...flags, ...argv], SERVER_FLAGS, env);
    return buildServerConfig(p.values, p.webhooks);
  };
  const f = file(`port: 4242
log-level: debug
parallel-plan: true
executable-name: "atl"
allow-commands: [version, plan]
max-comments-per-command: "7"
`);

  it('the file sets flags; flags and env beat it; it beats defaults', () => {
    const fromFile = cfg(['--config', f]);
    assert.equal(fromFile.port, 4242);
    assert.equal(fromFile.logLevel, 'debug');
    assert.equal(fromFile.parallelPlan, true);
    assert.equal(fromFile.executableName, 'atl');
    assert.deepEqual(fromFile.allowCommands, ['version', 'plan']);
    assert.equal(fromFile.maxCommentsPerCommand, 7);
    assert.equal(fromFile.parallelApply, false, 'unset in the file: the default');
    const envWins = cfg(['--config', f], { ATLANTIS_PORT: '4343', ATLANTIS_LOG_LEVEL: 'warn' });
    assert.equal(envWins.port, 4343);
    assert.equal(envWins.logLevel, 'warn');
    const flagWins = cfg(['--config', f, '--port', '4444'], { ATLANTIS_PORT: '4343' });
    assert.equal(flagWins.port, 4444);
  });

  it('ATLANTIS_CONFIG names the file too', () => {
    assert.equal(cfg([], { ATLANTIS_CONFIG: f }).port, 4242);
  });

  it('an empty file changes nothing', () => {
    assert.equal(cfg(['--config', file('')]).port, 4141);
  });

  it('an Atlantis flag this server refuses is refused from the file as from the command line', () => {
    assert.match(
      usage(() => cfg(['--config', file('autoplan-modules: true\n')])),
      /--autoplan-modules \(ATLANTIS_AUTOPLAN_MODULES\) is set/,
    );
  });
});

describe('--config: bad files are refused with one line', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['an unknown key', 'repo-alowlist: "*"\n', /unknown key "repo-alowlist" in --config .*: not a server flag/],
    ['a key naming the file itself', 'config: other.yaml\n', /unknown key "config"/],
    ['a word for an int', 'port: abc\n', /invalid value "abc" for port in --config .*: must be an integer/],
    ['a bool for an int', 'port: true\n', /invalid value for port in --config .*: must be an integer, not true/],
    ['a fraction for an int', 'port: 41.5\n', /must be an integer, not 41.5/],
    [
      'a word for a bool',
      'parallel-plan: sometimes\n',
      /invalid value "sometimes" for parallel-plan in --config .*: must be true or false/,
    ],
    ['a map for a string', 'repo-allowlist: {a: 1}\n', /invalid value for repo-allowlist in --config .*: must be a string, not a map/],
    ['a list for a string', 'repo-allowlist: [a, b]\n', /must be a string, not a list/],
    ['not a map', '- port\n', /must be a YAML map of flag names to values/],
    ['broken YAML', 'port: [1\n', /invalid config: reading .*config-\d+\.yaml: /],
    ['webhooks not a list', 'webhooks: {kind: http}\n', /invalid value for webhooks in --config .*: must be a list/],
    ['an unknown webhook key', 'webhooks:\n  - kind: http\n    event: apply\n    uri: http://x\n', /unknown key "uri" in webhooks\[0\]/],
  ];
  const { flags } = requiredFlags('ato-config-file-bad-');
  for (const [what, text, re] of cases)
    it(what, () =>
      assert.match(
        usage(() => parseFlagsWithConfigFile([...flags, '--config', file(text)], SERVER_FLAGS, {})),
        re,
      ),
    );

  it('a file that cannot be read', () => {
    assert.match(
      usage(() => readConfigFile(path.join(dir, 'missing.yaml'), SERVER_FLAGS)),
      /invalid config: reading .*missing\.yaml: ENOENT/,
    );
  });

  it('the server refuses to start on a bad file: exit 2, one line, nothing listening', () => {
    assertBuilt();
    const { flags, dataDir } = requiredFlags('ato-config-file-cli-');
    const bad = file('port: 4141\nrepo-alowlist: "*"\nslack-token: xoxb-very-secret\n');
    const r = runCli(['server', ...flags, '--config', bad, '--port', '0']);
    rmSync(dataDir, { recursive: true, force: true });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /unknown key "repo-alowlist"/);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.doesNotMatch(r.stderr + r.stdout, /xoxb-very-secret/);
  });
});

describe('webhooks: and --webhook-http-headers', () => {
  const entry = (o: Partial<Record<'event' | 'kind' | 'url' | 'workspaceRegex' | 'branchRegex' | 'channel', string>>) => ({
    event: 'apply',
    kind: 'http',
    url: 'http://127.0.0.1:9/hook',
    workspaceRegex: '',
    branchRegex: '',
    channel: '',
    ...o,
  });
  const refused: Array<[string, ReturnType<typeof entry>, RegExp]> = [
    ['kind slack: Slack needs Slack', entry({ kind: 'slack', channel: 'ops' }), /"kind: slack" is not supported: Slack notifications need/],
    ['no kind', entry({ kind: '' }), /must specify "kind" and "event" keys for webhooks/],
    ['no event', entry({ event: '' }), /must specify "kind" and "event" keys/],
    ['a drift event', entry({ event: 'drift' }), /"event: drift" is not supported/],
    ['another event', entry({ event: 'plan' }), /"event: plan" not supported. Only "event: apply" is supported/],
    ['another kind', entry({ kind: 'msteams' }), /"kind: msteams" not supported/],
    ['http without url', entry({ url: '' }), /must specify "url" if using a webhook of "kind: http"/],
    ['a file URL', entry({ url: 'file:///etc/passwd' }), /must be http or https/],
    ['a bad regex', entry({ workspaceRegex: '(' }), /invalid workspace-regex of webhooks\[0\]/],
  ];
  for (const [what, e, re] of refused) it(`refused: ${what}`, () => assert.throws(() => parseWebhookSettings([e], undefined), re));

  it('--webhook-http-headers: strings and arrays of strings, as Atlantis; anything else refused', () => {
    assert.deepEqual(parseWebhookHeaders('{"Authorization":"Bearer t","X-Multi":["a","b"]}'), {
      Authorization: ['Bearer t'],
      'X-Multi': ['a', 'b'],
    });
    assert.throws(() => parseWebhookHeaders('{"X":1}'), /expected string or array, got number/);
    assert.throws(() => parseWebhookHeaders('{"X":[1]}'), /expected string array element/);
    assert.throws(() => parseWebhookHeaders('[1]'), /must be a JSON object/);
    assert.throws(() => parseWebhookHeaders('{"bad name":"x"}'), /is not a header name/);
    assert.throws(() => parseWebhookHeaders('{'), /invalid --webhook-http-headers/);
  });

  it("the config refuses a Slack webhook at start, and the headers' values are secrets", () => {
    const { flags } = requiredFlags('ato-config-file-wh-');
    const slack = file('webhooks:\n  - event: apply\n    kind: slack\n    channel: ops\n');
    const p = parseFlagsWithConfigFile([...flags, '--config', slack], SERVER_FLAGS, {});
    assert.match(
      usage(() => buildServerConfig(p.values, p.webhooks)),
      /^initializing webhooks: "kind: slack" is not supported/,
    );
    const ok = file('webhooks:\n  - event: apply\n    kind: http\n    url: http://127.0.0.1:9/x\n    workspace-regex: "prod.*"\n');
    const q = parseFlagsWithConfigFile([...flags, '--config', ok], SERVER_FLAGS, {
      ATLANTIS_WEBHOOK_HTTP_HEADERS: '{"Authorization":"Bearer hook-token-123"}',
    });
    const cfg = buildServerConfig(q.values, q.webhooks);
    assert.equal(cfg.webhooks.webhooks.length, 1);
    assert.ok(serverSecretValues(cfg).includes('Bearer hook-token-123'));
  });

  it("sends Atlantis's body with the headers to each webhook whose regexes match; a failing one is logged, never thrown", async () => {
    const got: Array<{ path: string; headers: Record<string, string | string[] | undefined>; body: Record<string, unknown> }> = [];
    const srv = createServer((req, res) => {
      let b = '';
      req.on('data', (d: Buffer) => (b += d.toString()));
      req.on('end', () => {
        got.push({ path: req.url ?? '', headers: req.headers, body: JSON.parse(b) as Record<string, unknown> });
        res.statusCode = req.url === '/fail' ? 500 : 200;
        res.end(req.url === '/fail' ? 'nope' : 'ok');
      });
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
    const lines: string[] = [];
    const logger: Logger = {
      error: (m, f) => lines.push(`${m} ${JSON.stringify(f)}`),
      warn: (m, f) => lines.push(`${m} ${JSON.stringify(f)}`),
      info: () => undefined,
      debug: () => undefined,
      child: () => logger,
    };
    const hooks = new ApplyWebhooks(
      parseWebhookSettings(
        [
          entry({ url: `${base}/all` }),
          entry({ url: `${base}/prod`, workspaceRegex: '^prod' }),
          entry({ url: `${base}/release`, branchRegex: '^release/' }),
          entry({ url: `${base}/fail` }),
        ],
        '{"X-Token":"tok","X-Multi":["a","b"]}',
      ),
      logger,
    );
    const notice = {
      repo: 'acme/infra',
      hostname: 'github.com',
      hostType: 'Github',
      pullUrl: 'https://github.com/acme/infra/pull/7',
      vcsUser: 'atlantis-bot',
      pull: 7,
      headSha: 'abc123',
      headRef: 'feature',
      baseRef: 'main',
      author: 'dev',
      user: 'ops',
      workspace: 'default',
      dir: 'dir1',
      projectName: '',
      success: true,
    };
    try {
      await hooks.send(notice);
    } finally {
      srv.close();
    }
    assert.deepEqual(
      got.map((g) => g.path),
      ['/all', '/fail'],
    );
    assert.equal(got[0]!.headers['x-token'], 'tok');
    assert.equal(got[0]!.headers['x-multi'], 'a, b');
    assert.equal(got[0]!.headers['content-type'], 'application/json');
    assert.deepEqual(got[0]!.body, applyWebhookBody(notice));
    const body = got[0]!.body as {
      Repo: { CloneURL: string };
      Pull: { Num: number; BaseBranch: string };
      Success: boolean;
      Directory: string;
    };
    assert.equal(body.Repo.CloneURL, 'https://atlantis-bot:<redacted>@github.com/acme/infra.git');
    assert.equal(body.Pull.Num, 7);
    assert.equal(body.Directory, 'dir1');
    assert.ok(lines.some((l) => /Could not send a webhook/.test(l) && /returned status code 500/.test(l)));
  });
});
