// The output of `migrate helm-values`: a YAML stream (the ConfigMaps, then the
// AtlantisDeployment) headed by a comment block that lists the Secrets it reads, the values not
// converted with their reasons, and notes; and the summary for a person on stderr. Pure.
import { stringify } from 'yaml';
import { CHART_NAME, CHART_VERSION } from './chart-defaults.js';
import type { Finding, SecretNeeded } from './conversion.js';
import type { Converted } from './convert.js';

function secretLines(s: SecretNeeded): string[] {
  const how = s.create
    ? `create it${s.chartSecret ? `; the chart's Secret ${s.chartSecret} has these keys` : ''}`
    : 'exists: named in the values';
  const lines = [`${s.name} (${how}):`];
  if (s.whole) lines.push(`  ${s.whole}`);
  for (const k of s.keys) lines.push(`  ${k.key}: ${k.holds}`);
  return lines;
}

const findings = (list: Finding[]): string[] => list.map((f) => `${f.value}: ${f.reason}`);

/** The comment block's lines (without `# `). */
export function headerLines(r: Converted, files: string[], release: string): string[] {
  const lines = [
    `From the values of the ${CHART_NAME} chart ${CHART_VERSION} (${files.join(', ')}; release ${release}) by atlantis-operator migrate helm-values:`,
    `the AtlantisDeployment ${r.deployment.metadata.name}${r.configMaps.length ? ` and the ConfigMaps it reads (${r.configMaps.map((m) => m.metadata?.name).join(', ')})` : ''}.`,
    'Apply with kubectl apply --server-side -f <this file> (docs/migrating-from-atlantis.md).',
  ];
  if (r.deployment.metadata.name === r.fullname)
    lines.push(
      `The chart's Service ${r.fullname}, and its Ingress ${r.fullname} if it made one, have the names of the operator's: delete them first (helm upgrade --reuse-values makes them again).`,
    );
  if (r.secrets.length) {
    lines.push('', 'Secrets it reads (their values are never copied here; create the ones to create before applying):');
    for (const s of r.secrets) lines.push(...secretLines(s).map((l) => `  ${l}`));
  }
  lines.push('', r.unmapped.length ? `Not converted (${r.unmapped.length}):` : 'Not converted: none.');
  lines.push(...findings(r.unmapped).map((l) => `  ${l}`));
  if (r.notes.length) lines.push('', 'Notes:', ...findings(r.notes).map((l) => `  ${l}`));
  return lines;
}

/** stdout: the comment block, then each object as a YAML document. */
export function renderYaml(r: Converted, files: string[], release: string): string {
  const header = headerLines(r, files, release)
    .map((l) => (l ? `# ${l}` : '#'))
    .join('\n');
  const docs = [...r.configMaps, r.deployment].map((o) => stringify(o, { lineWidth: 0 }));
  return `${header}\n${docs.map((d) => `---\n${d}`).join('')}`;
}

/** stderr: what a person must act on. */
export function summaryLines(r: Converted): string[] {
  const create = r.secrets.filter((s) => s.create);
  const lines = [
    `Converted into the AtlantisDeployment ${r.deployment.metadata.name}${r.configMaps.length ? ` and ${r.configMaps.length} ConfigMap${r.configMaps.length > 1 ? 's' : ''}` : ''}.`,
  ];
  if (create.length)
    lines.push(
      `Secrets to create before applying: ${create.map((s) => s.name).join(', ')} (their keys are listed at the top of the output).`,
    );
  if (r.unmapped.length) lines.push(`Not converted (${r.unmapped.length}):`, ...findings(r.unmapped).map((l) => `  ${l}`));
  return lines;
}
