// `atlantis-operator migrate helm-values <values.yaml> [...]`: reads the values files of an
// install of the official Atlantis chart and prints the AtlantisDeployment and ConfigMaps that
// take its place (stdout), headed by the Secrets they read and the values not converted; the
// summary goes to stderr. Exit codes: 0 everything converted; 3 converted, with values not
// converted (listed); 1 a values file that cannot be read or converted; 2 a usage error.
import { readFileSync } from 'node:fs';
import { type FlagSpec, parseFlags, renderHelp, UsageError } from '../../config/flags.js';
import { VERSION } from '../../version.js';
import { CHART_NAME, CHART_VERSION } from './chart-defaults.js';
import { convertValues } from './convert.js';
import { renderYaml, summaryLines } from './render.js';
import { type Obj, parseValues, ValuesError } from './values.js';

export const EXIT_UNMAPPED = 3;

export const HELM_VALUES_FLAGS: FlagSpec[] = [
  {
    name: 'release',
    type: 'string',
    default: 'atlantis',
    envPrefix: null,
    description: "The chart's release name (helm list): the chart named its objects and Secrets after it",
  },
  {
    name: 'name',
    type: 'string',
    envPrefix: null,
    description: "The AtlantisDeployment's name (default: the chart's full name, as its StatefulSet's)",
  },
  {
    name: 'namespace',
    type: 'string',
    envPrefix: null,
    description: 'Set metadata.namespace of every object (default: none, so kubectl -n decides)',
  },
  {
    name: 'image',
    type: 'string',
    default: `atlantis-operator:${VERSION}`,
    envPrefix: null,
    description: "spec.image: this server's image as your cluster pulls it (the chart's Atlantis image cannot run here)",
  },
];

export interface HelmValuesIo {
  out: (text: string) => void;
  err: (text: string) => void;
  /** Reads a file, or stdin for `-`. */
  read: (file: string) => string;
}

const defaultIo: HelmValuesIo = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  read: (f) => readFileSync(f === '-' ? 0 : f, 'utf8'),
};

export function migrateHelmValues(argv: string[], io: HelmValuesIo = defaultIo): number {
  const parsed = parseFlags(argv, HELM_VALUES_FLAGS);
  if (parsed.help) {
    io.out(
      renderHelp(
        'atlantis-operator migrate helm-values <values.yaml> [<values.yaml> ...] [flags]',
        `Prints the AtlantisDeployment and ConfigMaps that replace an install of the official Atlantis chart (${CHART_NAME} ${CHART_VERSION}) with these values (helm get values <release> -o yaml; several files merge as helm -f does, '-' is stdin), headed by the Secrets they read (never their values) and every value not converted, with why. Exit 0: all converted; 3: converted, with values not converted; 1: a values file that cannot be converted.`,
        HELM_VALUES_FLAGS,
      ),
    );
    return 0;
  }
  const files = parsed.positionals;
  if (!files.length)
    throw new UsageError('migrate helm-values takes the values files to convert (helm get values <release> -o yaml > values.yaml)');
  const values: Obj[] = [];
  try {
    for (const f of files) {
      let text: string;
      try {
        text = io.read(f);
      } catch (e) {
        throw new ValuesError(`${f}: cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
      }
      values.push(parseValues(text, f === '-' ? 'stdin' : f));
    }
    const release = parsed.values.release as string;
    const r = convertValues(values, {
      release,
      image: parsed.values.image as string,
      ...(parsed.values.name ? { name: parsed.values.name as string } : {}),
      ...(parsed.values.namespace ? { namespace: parsed.values.namespace as string } : {}),
    });
    io.out(renderYaml(r, files, release));
    io.err(`${summaryLines(r).join('\n')}\n`);
    return r.unmapped.length ? EXIT_UNMAPPED : 0;
  } catch (e) {
    if (!(e instanceof ValuesError)) throw e;
    io.err(`atlantis-operator: nothing converted: ${e.message}\n`);
    return 1;
  }
}
