import sinon from 'sinon';
import { CoreV1Api } from '@kubernetes/client-node';
import { notFound } from './api-errors.js';

/** A CoreV1Api whose every method is a sinon stub (answering undefined until told otherwise). */
export type CoreStub = sinon.SinonStubbedInstance<CoreV1Api>;

export const coreStub = (): CoreStub => sinon.createStubInstance(CoreV1Api);

/** The namespaced kinds {@link emptyCluster} can answer for. */
export type EmptyKind = 'ConfigMap' | 'Secret' | 'Service';

/**
 * Makes `core` answer for these kinds the way an empty cluster does: a read misses (404), a
 * create or a replace returns the body it was given, a delete succeeds. Other methods are left
 * as they were.
 */
export function emptyCluster(core: CoreStub, kinds: readonly EmptyKind[]): CoreStub {
  for (const kind of kinds) {
    core[`readNamespaced${kind}`].rejects(notFound());
    (core[`createNamespaced${kind}`] as sinon.SinonStub).callsFake(async ({ body }: { body: unknown }) => body);
    (core[`replaceNamespaced${kind}`] as sinon.SinonStub).callsFake(async ({ body }: { body: unknown }) => body);
    core[`deleteNamespaced${kind}`].resolves({});
  }
  return core;
}
