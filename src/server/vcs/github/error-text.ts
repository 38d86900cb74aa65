// GitHub API errors worded as Atlantis's GitHub library (go-github) words them, for the texts
// Atlantis shows with them: `Automerging failed:` comments, App start-up errors.
import { GitHubApiError } from './client.js';

/** An API error as Atlantis's GitHub library words it (`PUT <url>: 405 <message> []`). */
export function githubErrorText(e: unknown, baseUrl: string): string {
  if (!(e instanceof GitHubApiError)) return e instanceof Error ? e.message : String(e);
  const url = `${baseUrl}${e.path}`;
  if (e.status === 0) return `${e.method} ${url}: ${e.githubMessage}`;
  const details = Array.isArray(e.details)
    ? e.details
        .map((d) => {
          const o = (typeof d === 'object' && d !== null ? d : {}) as Record<string, unknown>;
          return `{Resource:${String(o.resource ?? '')} Field:${String(o.field ?? '')} Code:${String(o.code ?? '')} Message:${String(o.message ?? '')}}`;
        })
        .join(' ')
    : '';
  return `${e.method} ${url}: ${e.status} ${e.githubMessage} [${details}]`;
}
