import type { TargetHealth } from '../clusters/cluster-registry.js';
import type { TargetClient } from '../clusters/target-client.js';
import { isOutage } from '../model/outage.js';

/**
 * One key's pass over every target, for the reconcilers that keep something in each target
 * (follow's and services' copies), whose workers all targets share.
 *
 * * A target in an outage (`isOutage`: its last probe found its API out of reach) is passed
 *   over. A call there would hold a worker until its deadline, so every other target's keys
 *   would wait behind it, and nothing in it can be done before it is back. The key is owed to
 *   that target: {@link wake} gives it back after the first probe that finds the target
 *   reachable again, and {@link drop} when its clients go.
 * * A pass that fails in one target does not keep the others from theirs: once every target
 *   has had its pass, the first error is thrown (the key is retried, every target again).
 */
export class TargetPasses {
  /** Target key -> the keys that passed it over while it was out of reach. */
  private readonly owed = new Map<string, Set<string>>();

  constructor(private readonly health: (targetKey: string) => TargetHealth | undefined) {}

  async each(key: string, targets: Iterable<TargetClient>, pass: (target: TargetClient) => Promise<void>): Promise<void> {
    let failed: { error: unknown } | undefined;
    let failures = 0;
    for (const target of targets) {
      if (isOutage(this.health(target.key))) {
        let keys = this.owed.get(target.key);
        if (!keys) this.owed.set(target.key, (keys = new Set()));
        keys.add(key);
        continue;
      }
      try {
        await pass(target);
      } catch (error) {
        failures++;
        failed ??= { error };
      }
    }
    if (!failed) return;
    if (failures === 1) throw failed.error;
    const first = failed.error instanceof Error ? failed.error.message : String(failed.error);
    throw new Error(`${failures} targets failed, the first: ${first}`, { cause: failed.error });
  }

  /** After a probe of `targetKey`: the keys owed to it, once it is out of its outage (each given once). */
  wake(targetKey: string): string[] {
    return isOutage(this.health(targetKey)) ? [] : this.drop(targetKey);
  }

  /** The keys owed to `targetKey`, whatever its health (its clients went: the next pass sees what is left). */
  drop(targetKey: string): string[] {
    const keys = this.owed.get(targetKey);
    this.owed.delete(targetKey);
    return keys ? [...keys] : [];
  }

  /** How many keys are owed to `targetKey` (tests, diagnostics). */
  owedTo(targetKey: string): number {
    return this.owed.get(targetKey)?.size ?? 0;
  }
}
