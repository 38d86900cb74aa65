// The --gitlab-* flags (Atlantis's names, so ATLANTIS_GITLAB_* env keeps working); the server
// lists them with its own (server-flags.ts) and settings.ts reads them.
import type { FlagSpec } from '../../../config/flags.js';

export const GITLAB_FLAGS: FlagSpec[] = [
  { name: 'gitlab-user', type: 'string', description: 'GitLab username of API user' },
  { name: 'gitlab-token', type: 'string', description: 'GitLab token of API user (scope api); a secret: give it as env' },
  { name: 'gitlab-webhook-secret', type: 'string', description: 'Secret used to validate GitLab webhooks (X-Gitlab-Token)' },
  {
    name: 'gitlab-hostname',
    type: 'string',
    default: 'gitlab.com',
    description: 'Hostname of your GitLab Enterprise installation, with its port and path if any (host[:port][/path], HTTPS assumed)',
  },
  {
    name: 'gitlab-group-allowlist',
    type: 'string',
    description:
      'Comma separated group:command pairs, e.g. acme/ops:apply,acme/dev:plan,*:unlock; with it set, a user runs a command only as a direct member of a listed GitLab group allowed that command',
  },
  {
    name: 'gitlab-status-retry-enabled',
    type: 'bool',
    default: false,
    description: "Look for the commit's pipeline five times (2 to 5 s apart) before setting a commit status, not twice",
  },
];
