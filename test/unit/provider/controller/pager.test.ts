import { expect } from 'chai';
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { forEachPage, TooManyItemsError } from '../../../../provider/controller/pager.js';

/** A server of `total` objects (Infinity: pages without end), `limit` a page. */
function server(total: number) {
  const asked: number[] = [];
  const list = async (limit: number, from: string | undefined): Promise<KubernetesListObject<KubernetesObject>> => {
    asked.push(limit);
    const start = Number(from ?? 0);
    const end = Math.min(total, start + limit);
    const items = Array.from({ length: end - start }, (_, i) => ({ metadata: { name: `o${start + i}` } }));
    return { items, metadata: end < total ? { _continue: String(end) } : { resourceVersion: '9' } };
  };
  return { list, asked };
}

describe('forEachPage: maxItems', () => {
  it('hands on every page of a listing within it', async () => {
    const { list } = server(1000);
    let seen = 0;
    expect(await forEachPage(list, (items) => void (seen += items.length), { what: 'pods', pageSize: 300, maxItems: 1000 })).to.equal('9');
    expect(seen).to.equal(1000);
  });

  it('ends a listing of pages without end with an error, before handing on the page that passes it', async () => {
    const { list, asked } = server(Infinity);
    let seen = 0;
    const error = await forEachPage(list, (items) => void (seen += items.length), { what: 'delegates in c2', pageSize: 300, maxItems: 1000 }).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(error).to.be.instanceOf(TooManyItemsError);
    expect(error?.message).to.equal('the server offered more than 1000 delegates in c2');
    expect(seen).to.equal(900);
    expect(asked).to.have.length(4);
  });
});
