// The signature of a terraform release's SHA256SUMS, checked as Atlantis v0.47 checks it
// through hc-install: a detached OpenPGP signature, `terraform_<v>_SHA256SUMS.<key id>.sig`
// or else `terraform_<v>_SHA256SUMS.sig` beside it, made by HashiCorp's key
// (hashicorp-key.ts) or by the key of --tf-download-key-file (a mirror that signs with its
// own; it replaces HashiCorp's, as hc-install's ArmoredPublicKey does). Without it, a zip
// was checked only against a SHA256SUMS from the same mirror, so whoever could change the
// mirror's answers (or an http:// mirror's traffic) could change both. OpenPGP is the
// `openpgp` package, loaded on the first download only (it is large, and most servers never
// download).
import { HASHICORP_PUBLIC_KEY } from './hashicorp-key.js';

export interface TrustedKey {
  armored: string;
  /** Who it is, for messages: "HashiCorp's key" or "the key of --tf-download-key-file". */
  owner: string;
}

export const HASHICORP_KEY: TrustedKey = { armored: HASHICORP_PUBLIC_KEY, owner: "HashiCorp's key" };

type OpenPgp = typeof import('openpgp');
let loaded: Promise<OpenPgp> | undefined;
const openpgp = (): Promise<OpenPgp> => {
  loaded ??= import('openpgp');
  return loaded;
};

/** The short id hc-install names a signature file by: the primary key's last 8 hex digits, upper case. */
export async function shortKeyId(key: TrustedKey): Promise<string> {
  const pgp = await openpgp();
  const k = await pgp.readKey({ armoredKey: key.armored });
  return k.getKeyID().toHex().slice(-8).toUpperCase();
}

/** The signature files to try for a SHA256SUMS URL, in hc-install's order. */
export function signatureUrls(sumsUrl: string, keyIds: readonly string[]): string[] {
  return [...keyIds.map((id) => `${sumsUrl}.${id}.sig`), `${sumsUrl}.sig`];
}

/**
 * Resolves when `signature` (binary or ASCII-armored) is a valid signature of `sums` by `key`
 * (its primary key or a signing subkey, valid at the signature's time); rejects with why not.
 */
export async function verifySumsSignature(sums: Buffer, signature: Buffer, key: TrustedKey, sumsName: string): Promise<void> {
  const pgp = await openpgp();
  let verificationKey: Awaited<ReturnType<OpenPgp['readKey']>>;
  try {
    verificationKey = await pgp.readKey({ armoredKey: key.armored });
  } catch (e) {
    throw new Error(`${key.owner} is not an OpenPGP public key: ${(e as Error).message}`);
  }
  let sig: Awaited<ReturnType<OpenPgp['readSignature']>>;
  try {
    const text = signature.toString('latin1');
    sig = text.startsWith('-----BEGIN PGP SIGNATURE-----')
      ? await pgp.readSignature({ armoredSignature: text })
      : await pgp.readSignature({ binarySignature: new Uint8Array(signature) });
  } catch (e) {
    throw new Error(`the signature of ${sumsName} is not an OpenPGP signature: ${(e as Error).message}`);
  }
  try {
    const message = await pgp.createMessage({ binary: new Uint8Array(sums) });
    const { signatures } = await pgp.verify({
      message,
      signature: sig,
      verificationKeys: verificationKey,
      expectSigned: true,
      format: 'binary',
    });
    await signatures[0]?.verified;
  } catch (e) {
    throw new Error(`${sumsName} is not signed by ${key.owner}: ${(e as Error).message}`);
  }
}
