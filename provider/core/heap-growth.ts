/**
 * How much V8 lets the old generation grow past what the last full collection left live, in
 * percent, before it collects again (V8's `--heap-growing-percent`).
 *
 * Why: left to itself, V8 grows a heap whose collections are quick by up to four times what
 * survived them. The provider's garbage is one freshly parsed object per watch event, most of it
 * promoted before it dies, so with thousands of proxies the old generation filled with dead
 * events until it held about twice the live heap (see the README, Performance, "Memory with
 * thousands of proxies"). A fixed, small factor trades some more full collections (marked
 * concurrently) for a resident size that follows the live heap. It bounds no size: a provider
 * with more proxies than expected collects more often, it never runs out of heap for it.
 */
export const HEAP_GROWING_PERCENT = 20;

const FLAG = '--heap-growing-percent';

/**
 * The node options the provider ships with: a young generation of 16 MiB (two semi-spaces of 8)
 * instead of V8's 32 on 64 bits. At 5000 offloaded pods the young generation is full at every
 * peak of RSS, and halving it took the peak from 188-192 MiB to 175 (1000 pods: 147-154 to 132)
 * for CPU within what runs move (README, Performance, "The young generation"). V8 sizes
 * it when it makes the heap, so unlike {@link HEAP_GROWING_PERCENT} the provider cannot set it
 * for itself: the image sets `NODE_OPTIONS` to this, and the sandbox starts its providers so.
 * An operator's own `NODE_OPTIONS` in the Deployment replaces it.
 */
export const SHIPPED_NODE_OPTIONS = '--max-semi-space-size=8';

/**
 * Applies {@link HEAP_GROWING_PERCENT} to this process's V8, unless its node command line sets
 * the flag itself (`node --heap-growing-percent=50 bin/admiralty.js provider`), which then wins.
 * V8 reads the flag at every heap resize, so setting it at start-up takes effect as if given on
 * the command line. Called once by the provider command, which is how the bin, the Deployment,
 * the chart and the sandbox all start it.
 *
 * @returns the flag that was set, or undefined when the command line's was kept.
 */
export function limitHeapGrowth(execArgv: readonly string[], setFlags: (flags: string) => void): string | undefined {
  // V8 takes `_` for `-` in flag names.
  if (execArgv.some((a) => `--${a.slice(2).replace(/_/g, '-')}`.split('=')[0] === FLAG)) return undefined;
  const flag = `${FLAG}=${HEAP_GROWING_PERCENT}`;
  setFlags(flag);
  return flag;
}
