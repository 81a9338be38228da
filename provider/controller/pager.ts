import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';

/** As client-go's pager: an answer stays small however many objects there are. */
export const DEFAULT_PAGE_SIZE = 500;

/**
 * Lists a collection page by page (`limit` and `continue`), handing each page to `onPage` before
 * asking for the next, so that no more than a page is held for the listing's sake. A page whose
 * answer was too large (a FetchError of type `max-size`, as the API transport gives past its
 * bounds) is asked again for a quarter as many objects, down to one; pages grow back to
 * `pageSize` after it. A page with no objects that says there is more ends the listing with an
 * error: a server could otherwise keep it going forever.
 *
 * With `maxItems`, a listing whose pages hold more objects in all ends with an error before the
 * page that passes it is handed on: for a server that may offer pages without end.
 *
 * Resolves with the list's resourceVersion (of its last page), or undefined when `current` said
 * the listing no longer matters (it is asked after each answer). Throws what `list` or `onPage`
 * throws.
 */
export async function forEachPage<T extends KubernetesObject>(
  list: (limit: number, from: string | undefined) => Promise<KubernetesListObject<T>>,
  onPage: (items: T[]) => void | Promise<void>,
  o: { what: string; pageSize?: number; current?: () => boolean; maxItems?: number },
): Promise<string | undefined> {
  const pageSize = o.pageSize ?? DEFAULT_PAGE_SIZE;
  let limit = pageSize;
  let from: string | undefined;
  let seen = 0;
  for (;;) {
    let page: KubernetesListObject<T>;
    try {
      page = await list(limit, from);
    } catch (err) {
      if ((err as { type?: unknown })?.type === 'max-size' && limit > 1) {
        limit = Math.max(1, Math.floor(limit / 4));
        continue;
      }
      throw err;
    }
    if (o.current && !o.current()) return undefined;
    const items = page.items ?? [];
    seen += items.length;
    if (o.maxItems !== undefined && seen > o.maxItems) throw new TooManyItemsError(`the server offered more than ${o.maxItems} ${o.what}`);
    await onPage(items);
    // Typed lists carry it as `_continue`, custom objects' lists (plain JSON) as `continue`.
    const meta = page.metadata as { _continue?: string; continue?: string; resourceVersion?: string } | undefined;
    const next = meta?._continue || meta?.continue;
    if (!next) return meta?.resourceVersion ?? '';
    if (items.length === 0) throw new Error(`the server answered a page of ${o.what} with no objects and a continue token`);
    from = next;
    limit = Math.min(pageSize, limit * 2);
  }
}

/** A listing that went past its `maxItems` (see {@link forEachPage}). */
export class TooManyItemsError extends Error {
  override readonly name = 'TooManyItemsError';
}
