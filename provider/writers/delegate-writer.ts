import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import type { TargetClient } from '../clusters/target-client.js';
import type { Clock } from '../core/clock.js';
import { isAlreadyExists, NotDelegatedError } from '../core/errors.js';
import { identityAnswer, unreadAnswer } from '../core/unread-answer.js';
import { buildDelegatePod, type DelegateGang } from '../model/delegate-pod.js';
import { rawBody } from '../core/raw-body.js';
import type { CopyNames } from '../model/pod-references.js';
import { targetIdentityLabels } from '../model/virtual-node.js';
import { markNotDelegated } from './proxy-writes.js';
import { refusalOf } from './target-refusal.js';

export interface DelegateWriterOptions {
  /** The source's API, where a refused proxy gets its `Delegated=False` condition. */
  sourceCore: CoreV1Api;
  sourceClusterName: string;
  clock: Clock;
  /** Copies what the delegate references into its target before it is created; the delegate names the copies so. */
  follow?: { ensureCopies(proxy: V1Pod, target: TargetClient): Promise<CopyNames> };
}

/**
 * What became of one creation: `created` (with, when `read: 'identity'` was asked, the new
 * delegate's name, namespace, uid and resourceVersion; otherwise an empty object), `nameTaken`
 * (a pod of the delegate's name exists in the target already: whose it is, the caller judges),
 * or `refused`: a copy (`of: 'copies'`, whose Warning event the follow reconciler recorded) or
 * the delegate itself (`of: 'delegate'`) was refused for a reason the pod's owner can act on;
 * the proxy's `Delegated` condition says so already.
 */
export type DelegateCreation = { outcome: 'created'; delegate: V1Pod } | { outcome: 'nameTaken' } | { outcome: 'refused'; of: 'copies' | 'delegate'; refusal: NotDelegatedError };

/** Thrown when the target failed the delegate's creation for a reason that is not a refusal (retry it); `cause` is the API's error. */
export class DelegateCreateError extends Error {}

/**
 * The one place delegates are written: by the delegation reconciler (a proxy bound by any
 * scheduler) and by the scheduler extender's bind (a proxy it is about to bind). Creates the
 * copies of the ConfigMaps and Secrets the delegate references first, then the delegate named
 * after them, labelled with the target's identity. Checks of tenancy and fencing are the
 * callers': each answers a refusal its own way (an event, an extender error).
 */
export class DelegateWriter {
  constructor(private readonly o: DelegateWriterOptions) {}

  /**
   * Creates the delegate of `proxy` in `target`. `read` says what of the created pod is read
   * from the answer: nothing (the informers bring it back), or its identity. Throws what the
   * copies threw when it is not a refusal, and a {@link DelegateCreateError} for a failed
   * creation of the delegate that is not one.
   */
  async create(proxy: V1Pod, target: TargetClient, read: 'nothing' | 'identity', gang?: DelegateGang): Promise<DelegateCreation> {
    const namespace = proxy.metadata!.namespace!;
    let copyNames: CopyNames | undefined;
    try {
      copyNames = await this.o.follow?.ensureCopies(proxy, target);
    } catch (err) {
      if (!(err instanceof NotDelegatedError)) throw err;
      await this.markNotDelegated(proxy, err);
      return { outcome: 'refused', of: 'copies', refusal: err };
    }
    // Named as delegateNameOf names it (the copies' names change references only).
    const body = buildDelegatePod(proxy, { sourceClusterName: this.o.sourceClusterName, copyNames, targetLabels: targetIdentityLabels(target.ref), ...(gang ? { gang } : {}) });
    try {
      const answer = read === 'identity' ? identityAnswer() : unreadAnswer();
      // A gang's delegate names its PodGroup in a field the generated client does not know.
      const delegate = await target.core.createNamespacedPod({ namespace, body }, gang?.podGroupName ? rawBody(body, answer) : answer);
      return { outcome: 'created', delegate };
    } catch (err) {
      if (isAlreadyExists(err)) return { outcome: 'nameTaken' };
      const refusal = await refusalOf(target, { kind: 'pod', namespace }, err);
      if (refusal) {
        await this.markNotDelegated(proxy, refusal);
        return { outcome: 'refused', of: 'delegate', refusal };
      }
      throw new DelegateCreateError(`creating delegate ${body.metadata?.name} in ${target.displayName}`, { cause: err });
    }
  }

  private markNotDelegated(proxy: V1Pod, refusal: NotDelegatedError): Promise<void> {
    return markNotDelegated(this.o.sourceCore, proxy, refusal.reason, refusal.message, new Date(this.o.clock.now()));
  }
}
