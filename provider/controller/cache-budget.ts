/**
 * What the caches of one target's informers may hold together, in estimated bytes of heap (see
 * {@link estimateHeapBytes}). A target's server is whoever wrote its kubeconfig: each of its
 * answers and events is bounded, but not how many objects it names, nor how big each one is
 * within those bounds, and the informers keep whatever matches their selectors (labels the
 * server can forge). The budget is what bounds the memory one target can make the provider
 * spend; an informer that would pass it refuses the object or the list instead (see
 * `Informer`), and says so here, for the target's status.
 */
export class CacheBudget {
  private used = 0;
  /** By informer: why it refused, while it has not listed within the budget since. */
  private readonly refusals = new Map<string, string>();

  constructor(readonly limitBytes: number) {}

  /** What the informers sharing the budget hold now. */
  get usedBytes(): number {
    return this.used;
  }

  /** Whether `bytes` more fit, on top of what is held less `freed` (what they replace). */
  fits(bytes: number, freed = 0): boolean {
    return this.used - freed + bytes <= this.limitBytes;
  }

  /** Counts `bytes` more held (negative: released). */
  add(bytes: number): void {
    this.used += bytes;
  }

  /** Informer `informer` refused something to stay within the budget, for the reason given. */
  refuse(informer: string, message: string): void {
    this.refusals.set(informer, message);
  }

  /** Informer `informer` holds what its server has again (a list that fits). */
  clear(informer: string): void {
    this.refusals.delete(informer);
  }

  /** One refusal in force (the first), or undefined when every informer holds what it should. */
  refusal(): string | undefined {
    return this.refusals.values().next().value;
  }
}

/** Raised by an informer that would pass its {@link CacheBudget}. */
export class CacheBudgetExceededError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CacheBudgetExceededError';
  }
}

/** An object's header and its first slots. */
const OBJECT_BYTES = 64;
/** An array's header. */
const ARRAY_BYTES = 48;
/** A member of an object: its slot, its part of the object's shape or dictionary, and of its name's entry. */
const MEMBER_BYTES = 48;
/** An item of an array. */
const ITEM_BYTES = 16;
/** A string's header (its length is added), and a number that is not a small integer. */
const BOXED_BYTES = 16;

/**
 * About how much heap a parsed JSON value holds, as V8 lays it out on 64 bits: each object and
 * array a header, each member and item a slot, each string a header and its length, each
 * member's name its length (names are shared by the objects that use them). Walks the value
 * without recursion (a server chooses how deep it nests). Costs a walk of the value: meant for
 * what an informer keeps after its transform, not for whole answers.
 */
export function estimateHeapBytes(value: unknown): number {
  let bytes = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      bytes += BOXED_BYTES + v.length;
    } else if (typeof v === 'number') {
      bytes += Number.isInteger(v) && Math.abs(v) < 2 ** 30 ? 0 : BOXED_BYTES;
    } else if (v instanceof Date) {
      bytes += OBJECT_BYTES;
    } else if (Array.isArray(v)) {
      bytes += ARRAY_BYTES + ITEM_BYTES * v.length;
      for (const item of v) if (item !== null && (typeof item === 'object' || typeof item === 'string' || typeof item === 'number')) stack.push(item);
    } else if (v !== null && typeof v === 'object') {
      bytes += OBJECT_BYTES;
      for (const key in v) {
        if (!Object.prototype.hasOwnProperty.call(v, key)) continue;
        bytes += MEMBER_BYTES + key.length;
        const member = (v as Record<string, unknown>)[key];
        if (member !== null && (typeof member === 'object' || typeof member === 'string' || typeof member === 'number')) stack.push(member);
      }
    }
  }
  return bytes;
}
