import type { V1Secret } from '@kubernetes/client-node';
import sinon from 'sinon';
import { bareApiError } from '../../support/api-errors.js';

/**
 * One in-memory Secret, `namespace/name`, with resourceVersion checks, behind sinon stubs of
 * CoreV1Api's read, create and replace.
 */
export function fakeSecretStore(namespace: string, name: string) {
  let stored: V1Secret | undefined;
  let version = 0;
  const core = {
    readNamespacedSecret: sinon.stub().callsFake(async (req: { name: string; namespace: string }) => {
      if (!stored || req.name !== name || req.namespace !== namespace) throw bareApiError(404, 'NotFound');
      return structuredClone(stored);
    }),
    createNamespacedSecret: sinon.stub().callsFake(async ({ body }: { body: V1Secret }) => {
      if (stored) throw bareApiError(409, 'AlreadyExists');
      stored = { ...structuredClone(body), metadata: { ...body.metadata, resourceVersion: String(++version) } };
      return structuredClone(stored);
    }),
    replaceNamespacedSecret: sinon.stub().callsFake(async ({ body }: { body: V1Secret }) => {
      if (!stored) throw bareApiError(404, 'NotFound');
      if (body.metadata?.resourceVersion !== stored.metadata?.resourceVersion) throw bareApiError(409, 'Conflict');
      stored = { ...structuredClone(body), metadata: { ...body.metadata, resourceVersion: String(++version) } };
      return structuredClone(stored);
    }),
  };
  return { core, get: () => stored, set: (s: V1Secret | undefined) => (stored = s) };
}
