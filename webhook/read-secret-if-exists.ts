import type { CoreV1Api, V1Secret } from '@kubernetes/client-node';
import { isNotFound } from '../provider/core/errors.js';

/** Reads a Secret; undefined when it does not exist, any other failure thrown with context. */
export async function readSecretIfExists(core: Pick<CoreV1Api, 'readNamespacedSecret'>, namespace: string, name: string): Promise<V1Secret | undefined> {
  try {
    return await core.readNamespacedSecret({ name, namespace });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw new Error(`reading Secret ${namespace}/${name}`, { cause: err });
  }
}
