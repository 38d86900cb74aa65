// The values' own variables and arguments: environmentRaw, environment, environmentSecrets,
// loadEnvFromSecrets and loadEnvFromConfigMaps, the keys of `config` (the file Atlantis reads
// with --config, which this server does not read: each key becomes its variable) and extraArgs.
// A variable of a flag goes through the server's flag table (flags.ts); a plain value under a
// name that holds a secret moves into a Secret, never copied. Pure.
import type { V1EnvVar } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { FIELD_ENV, OPERATOR_ENV } from '../../controller/resources/reserved.js';
import { asK8s, type Conversion } from './conversion.js';
import { envOfFlag, flagOfEnv, flagType, judgeFlag, SECRET_FLAGS, secretByName } from './flags.js';
import { flagVar } from './map-settings.js';
import { type Json, isObj, kindOf, type Obj, show, ValuesError, type Values } from './values.js';

/** The chart's system PATH, which is the image's too. */
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Variables the operator sets from the AtlantisDeployment's fields, and those of the chart's own settings. */
function setElsewhere(c: Conversion): Set<string> {
  const set = c.envSet();
  const a = c.atlantis;
  if (a.url) set.add('ATLANTIS_ATLANTIS_URL');
  if (a.repoAllowlist) set.add('ATLANTIS_REPO_ALLOWLIST');
  if (a.github?.user) set.add('ATLANTIS_GH_USER');
  if (a.github?.tokenSecretRef) set.add('ATLANTIS_GH_TOKEN');
  if (a.github?.webhookSecretRef) set.add('ATLANTIS_GH_WEBHOOK_SECRET');
  for (const [field, vars] of FIELD_ENV) if (a[field as keyof typeof a] !== undefined) for (const n of vars) set.add(n);
  return set;
}

/** The field of spec.atlantis that sets variable `name`, when that field is set. */
function fieldSetting(c: Conversion, name: string): string | undefined {
  const a = c.atlantis;
  return FIELD_ENV.find(([field, vars]) => a[field as keyof typeof a] !== undefined && vars.includes(name))?.[0];
}

/**
 * One variable of the values, where `path` names it. The chart put its own settings after the
 * values' variables, so where both set one, the chart's won: this one is reported, not copied.
 */
function userVar(c: Conversion, path: string, e: V1EnvVar, elsewhere: Set<string>): V1EnvVar | undefined {
  const name = e.name;
  if (OPERATOR_ENV.includes(name) && !name.startsWith('ATLANTIS_')) {
    c.notMapped(path, `the operator sets ${name} itself`);
    return undefined;
  }
  if (elsewhere.has(name)) {
    c.notMapped(
      path,
      `${name} is set by another chart value, which came later in the chart's pod and won; the AtlantisDeployment sets it from that value`,
    );
    return undefined;
  }
  const flag = flagOfEnv(name);
  if (flag) {
    if (e.value === undefined) {
      const verdict = judgeFlag(flag, '\0');
      if (verdict.kind === 'unmapped') {
        c.notMapped(path, verdict.reason);
        return undefined;
      }
      return e;
    }
    return flagVar(c, path, flag, e.value, () => c.newSecret('env'), `the value of ${path}`);
  }
  if (e.value !== undefined && secretByName(name))
    return { name, valueFrom: { secretKeyRef: c.secretRef(c.newSecret('env'), name, `the value of ${path}`) } };
  return e;
}

/** environment's values as the chart's `quote` writes them. */
function envText(path: string, x: Json): string {
  if (typeof x === 'string') return x;
  if (typeof x === 'number' || typeof x === 'boolean') return String(x);
  throw new ValuesError(`${path} must be a string, a number or true/false, not ${kindOf(x)}`);
}

export function mapUserEnv(v: Values, c: Conversion): void {
  const elsewhere = setElsewhere(c);
  const add = (path: string, e: V1EnvVar) => {
    const kept = userVar(c, path, e, elsewhere);
    if (kept) c.userEnv.push(kept);
  };
  v.list(['environmentRaw'], 'mapping').forEach((x, i) => {
    const e = asK8s<V1EnvVar>(x);
    if (typeof e.name !== 'string' || !e.name) throw new ValuesError(`environmentRaw[${i}] needs a name`);
    add(`environmentRaw[${i}]`, e);
  });
  // The chart's PATH: extraPath and the init container's shared dir before the system's.
  const extraPath = v.str('extraPath');
  const shared = v.str('initConfig', 'sharedDir');
  if (extraPath || (v.bool('initConfig', 'enabled') && shared))
    add(extraPath ? 'extraPath' : 'initConfig.sharedDir', {
      name: 'PATH',
      value: [extraPath, shared, SYSTEM_PATH].filter((p) => p).join(':'),
    });
  for (const [name, x] of Object.entries(v.obj('environment'))) {
    const path = show(['environment', name]);
    add(path, { name, value: envText(path, x) });
  }
  v.list(['environmentSecrets'], 'mapping').forEach((x, i) => {
    const o = x as Obj;
    const ref = o.secretKeyRef;
    if (typeof o.name !== 'string' || !isObj(ref) || typeof ref.name !== 'string' || typeof ref.key !== 'string')
      throw new ValuesError(`environmentSecrets[${i}] must be {name, secretKeyRef: {name, key}}`);
    add(`environmentSecrets[${i}]`, { name: o.name, valueFrom: { secretKeyRef: { name: ref.name, key: ref.key } } });
  });
  for (const name of v.list(['loadEnvFromSecrets'], 'string')) c.envFrom.push({ secretRef: { name: name as string } });
  for (const name of v.list(['loadEnvFromConfigMaps'], 'string')) c.envFrom.push({ configMapRef: { name: name as string } });
  mapConfig(v, c);
  mapExtraArgs(v, c);
}

/** The chart's `config`: the YAML file of flags Atlantis reads with --config, one variable per key. */
function mapConfig(v: Values, c: Conversion): void {
  const text = v.str('config');
  if (!text) return;
  let doc: unknown;
  try {
    doc = parse(text, { version: '1.1', prettyErrors: false });
  } catch {
    c.notMapped('config', 'not valid YAML, so Atlantis could not have read it');
    return;
  }
  if (!isObj(doc)) {
    c.notMapped('config', 'not a mapping of flags (the file --config reads)');
    return;
  }
  c.note('config', 'the operator gives the server no --config file: each of its flags is a variable of spec.atlantis.env instead');
  // Atlantis: flags and env win over the file.
  const set = new Set([...setElsewhere(c), ...c.userEnv.map((e) => e.name)]);
  for (const [key, x] of Object.entries(doc)) {
    const path = `config.${key}`;
    if (key === 'webhooks') {
      c.notMapped(
        path,
        'HTTP webhooks are read from a --config file, which an AtlantisDeployment does not mount (Slack ones are not implemented)',
      );
      continue;
    }
    if (typeof x !== 'string' && typeof x !== 'number' && typeof x !== 'boolean') {
      const verdict = judgeFlag(key, '\0');
      c.notMapped(
        path,
        verdict.kind === 'unmapped' ? verdict.reason : `a flag's value must be a string, a number or true/false, not ${kindOf(x as Json)}`,
      );
      continue;
    }
    if (set.has(envOfFlag(key))) {
      c.notMapped(path, `${envOfFlag(key)} is set by a chart value too, which Atlantis took over the config file`);
      continue;
    }
    const e = flagVar(
      c,
      path,
      key,
      x,
      () => c.newSecret('env'),
      `the value of ${path} (the chart's ConfigMap ${c.names.fullname}, key atlantis.yaml)`,
    );
    if (e) c.userEnv.push(e);
  }
}

/** extraArgs: kept as arguments, except a secret (moved into a Secret, as a variable) and what the server would refuse. */
function mapExtraArgs(v: Values, c: Conversion): void {
  const args = v.list(['extraArgs']);
  for (let i = 0; i < args.length; i++) {
    const path = `extraArgs[${i}]`;
    const a = args[i];
    if (typeof a !== 'string' && typeof a !== 'number' && typeof a !== 'boolean')
      throw new ValuesError(`${path} must be a string, not ${kindOf(a)}`);
    const arg = String(a);
    const m = /^--?([a-z0-9][a-z0-9-]*)(?:=([\s\S]*))?$/.exec(arg);
    if (!m) {
      c.notMapped(path, 'not a flag (`server` takes no other arguments)');
      continue;
    }
    const flag = m[1] as string;
    let value: string | boolean | undefined = m[2];
    const parts = [arg];
    if (value === undefined) {
      const next = args[i + 1];
      if (flagType(flag) !== 'bool' && flagType(flag) !== undefined && typeof next === 'string' && !next.startsWith('-')) {
        value = next;
        parts.push(next);
        i++;
      } else value = true;
    }
    const verdict = judgeFlag(flag, value);
    const field = fieldSetting(c, envOfFlag(flag));
    if (verdict.kind === 'unmapped') c.notMapped(path, verdict.reason);
    else if (SECRET_FLAGS.has(flag) && field)
      c.notMapped(
        path,
        `spec.atlantis.${field} sets --${flag}, which this argument overrode in the chart: put its value in the Secret that field reads instead`,
      );
    else if (SECRET_FLAGS.has(flag)) {
      const name = envOfFlag(flag);
      c.userEnv.push({ name, valueFrom: { secretKeyRef: c.secretRef(c.newSecret('env'), name, `the value of ${path}`) } });
      c.note(path, `a secret as an argument is visible to every process of the node: moved into the Secret ${c.names.name}-env as ${name}`);
    } else c.extraArgs.push(...parts);
  }
}
