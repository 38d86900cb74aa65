// Atlantis's outgoing notifications: the `webhooks:` list of a --config file, each sent after
// every project apply whose workspace and base branch match its regexes, as a JSON POST with
// Atlantis's body (its ApplyResult) and the --webhook-http-headers. Only `kind: http`: Slack
// needs Slack's API, so `kind: slack` stops the server at start with a clear error, as does
// an event other than `apply`. A failed send is logged and never fails the apply.
import type { WebhookEntry } from '../../config/config-file.js';
import type { Logger } from '../../log.js';

export interface HttpWebhook {
  url: string;
  workspaceRegex: RegExp;
  branchRegex: RegExp;
}

export interface WebhookSettings {
  webhooks: HttpWebhook[];
  /** --webhook-http-headers: name -> values (a secret: they often carry a token). */
  headers: Record<string, string[]>;
}

/** The regex a workspace-regex or branch-regex names; '' matches everything, as in Go. */
function regex(source: string, key: string, i: number): RegExp {
  try {
    return new RegExp(source, 'u');
  } catch (e) {
    throw new Error(`invalid ${key} of webhooks[${i}]: ${(e as Error).message}`);
  }
}

/** The webhooks and headers the server sends with; throws one line naming what is wrong. */
export function parseWebhookSettings(entries: WebhookEntry[], headersJson: string | undefined): WebhookSettings {
  const webhooks = entries.map((e, i): HttpWebhook => {
    // Atlantis's words where it has them (server/events/webhooks).
    if (e.kind === '' || e.event === '') throw new Error('must specify "kind" and "event" keys for webhooks');
    if (e.event === 'drift') throw new Error('"event: drift" is not supported: this server has no drift detection');
    if (e.event !== 'apply') throw new Error(`"event: ${e.event}" not supported. Only "event: apply" is supported`);
    if (e.kind === 'slack')
      throw new Error('"kind: slack" is not supported: Slack notifications need a Slack workspace and token; use "kind: http"');
    if (e.kind !== 'http') throw new Error(`"kind: ${e.kind}" not supported. Only "kind: http" is supported`);
    if (e.url === '') throw new Error('must specify "url" if using a webhook of "kind: http"');
    let url: URL;
    try {
      url = new URL(e.url);
    } catch {
      throw new Error(`invalid "url" of webhooks[${i}]: not a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`invalid "url" of webhooks[${i}]: must be http or https`);
    return {
      url: e.url,
      workspaceRegex: regex(e.workspaceRegex, 'workspace-regex', i),
      branchRegex: regex(e.branchRegex, 'branch-regex', i),
    };
  });
  return { webhooks, headers: parseWebhookHeaders(headersJson) };
}

/** --webhook-http-headers: a JSON object of header names to a string or a list of strings. */
export function parseWebhookHeaders(json: string | undefined): Record<string, string[]> {
  if (json === undefined || json === '') return {};
  let m: unknown;
  try {
    m = JSON.parse(json);
  } catch (e) {
    throw new Error(`invalid --webhook-http-headers: ${(e as Error).message}`);
  }
  if (typeof m !== 'object' || m === null || Array.isArray(m)) throw new Error('invalid --webhook-http-headers: must be a JSON object');
  const out: Record<string, string[]> = {};
  for (const [name, v] of Object.entries(m as Record<string, unknown>)) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name))
      throw new Error(`invalid --webhook-http-headers: ${JSON.stringify(name)} is not a header name`);
    const values = typeof v === 'string' ? [v] : Array.isArray(v) ? v : undefined;
    if (!values) throw new Error(`invalid --webhook-http-headers: expected string or array, got ${v === null ? 'null' : typeof v}`);
    for (const x of values)
      if (typeof x !== 'string') throw new Error(`invalid --webhook-http-headers: expected string array element, got ${typeof x}`);
    out[name] = values as string[];
  }
  return out;
}

/** Atlantis's models.VCSHostType, in its order: the body's VCSHost.Type is the index. */
const VCS_HOST_TYPES = ['Github', 'Gitlab', 'BitbucketCloud', 'BitbucketServer', 'AzureDevops', 'Gitea'];

/** One project's apply, as the notification tells it. */
export interface ApplyNotice {
  /** `owner/name` */
  repo: string;
  /** The code host: its hostname, its Atlantis type name (VcsHost.typeName) and the pull request's page. */
  hostname: string;
  hostType: string;
  pullUrl: string;
  /** The host's user (--gh-user: the clone URL's user, never its token). */
  vcsUser: string;
  pull: number;
  headSha: string;
  headRef: string;
  baseRef: string;
  author: string;
  user: string;
  workspace: string;
  dir: string;
  projectName: string;
  success: boolean;
}

/**
 * Atlantis's JSON body (its ApplyResult, Go field names). Its CloneURL carries the VCS token;
 * here both clone URLs are the sanitised one: no secret leaves the server in a notification.
 */
export function applyWebhookBody(n: ApplyNotice): Record<string, unknown> {
  const [owner = '', name = ''] = n.repo.split('/');
  const sanitized = `https://${n.vcsUser ? `${n.vcsUser}:<redacted>@` : ''}${n.hostname}/${n.repo}.git`;
  const repo = {
    FullName: n.repo,
    Owner: owner,
    Name: name,
    CloneURL: sanitized,
    SanitizedCloneURL: sanitized,
    VCSHost: { Hostname: n.hostname, Type: Math.max(0, VCS_HOST_TYPES.indexOf(n.hostType)) },
  };
  return {
    Workspace: n.workspace,
    Repo: repo,
    Pull: {
      Num: n.pull,
      HeadCommit: n.headSha,
      URL: n.pullUrl,
      HeadBranch: n.headRef,
      BaseBranch: n.baseRef,
      HardenedNonPRRefCheckout: false,
      Author: n.author,
      Body: '',
      State: 0,
      BaseRepo: repo,
    },
    User: { Username: n.user, Teams: null },
    Success: n.success,
    Directory: n.dir,
    ProjectName: n.projectName,
  };
}

const SEND_TIMEOUT_MS = 10_000;

export class ApplyWebhooks {
  constructor(
    private readonly settings: WebhookSettings,
    private readonly logger: Logger,
  ) {}

  get enabled(): boolean {
    return this.settings.webhooks.length > 0;
  }

  /** Sends to every matching webhook, one after another; never throws. */
  async send(n: ApplyNotice): Promise<void> {
    for (const w of this.settings.webhooks) {
      if (!w.workspaceRegex.test(n.workspace) || !w.branchRegex.test(n.baseRef)) continue;
      try {
        const headers = new Headers({ 'content-type': 'application/json' });
        for (const [name, values] of Object.entries(this.settings.headers)) for (const v of values) headers.append(name, v);
        const res = await fetch(w.url, {
          method: 'POST',
          headers,
          body: JSON.stringify(applyWebhookBody(n)),
          signal: AbortSignal.timeout(SEND_TIMEOUT_MS),
        });
        const text = await res.text().catch(() => '');
        if (res.status < 200 || res.status > 299)
          throw new Error(`returned status code ${res.status} with response ${JSON.stringify(text.slice(0, 200))}`);
      } catch (e) {
        this.logger.warn('Could not send a webhook', {
          to: new URL(w.url).origin,
          repo: n.repo,
          pull: n.pull,
          error: (e as Error).message,
        });
      }
    }
  }
}
