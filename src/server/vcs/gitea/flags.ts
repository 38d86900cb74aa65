// The server's Gitea flags (Atlantis's names, help and defaults); server-flags.ts lists them
// beside the others, and settings.ts reads them.
import type { FlagSpec } from '../../../config/flags.js';

export const GITEA_FLAGS: FlagSpec[] = [
  { name: 'gitea-user', type: 'string', description: 'Gitea username of API user (with --gitea-token: the server talks to Gitea)' },
  { name: 'gitea-token', type: 'string', description: 'Gitea token of API user; a secret: give it as env (ATLANTIS_GITEA_TOKEN)' },
  {
    name: 'gitea-base-url',
    type: 'string',
    default: 'https://gitea.com',
    description: "Base URL of Gitea server installation. Must include 'http://' or 'https://'",
  },
  {
    name: 'gitea-webhook-secret',
    type: 'string',
    description: 'Secret used to validate Gitea webhooks (X-Gitea-Signature); required, as --gh-webhook-secret is',
  },
  { name: 'gitea-page-size', type: 'int', default: 30, description: 'Number of items per page of a list read from Gitea' },
];
