// What every repo config parser shares to report what is wrong: the problems found so far, and
// the one test for a YAML map. A leaf: the key tables (keys.ts) and the parsers all use it.

export type Obj = Record<string, unknown>;

export class Problems {
  readonly list: string[] = [];
  add(where: string, msg: string): void {
    this.list.push(where ? `${where}: ${msg}` : msg);
  }
}

export function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
