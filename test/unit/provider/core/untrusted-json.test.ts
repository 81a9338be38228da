import { expect } from 'chai';
import { checkUntrustedJson, DEFAULT_MAX_JSON_DEPTH, parseUntrustedJson, UntrustedJsonError, type UntrustedJsonLimits } from '../../../../provider/core/untrusted-json.js';

function refusal(text: string, limits: UntrustedJsonLimits): string {
  try {
    parseUntrustedJson(text, limits);
  } catch (err) {
    expect(err).to.be.instanceOf(UntrustedJsonError);
    return (err as Error).message;
  }
  expect.fail('the text was accepted');
}

const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

describe('parseUntrustedJson', () => {
  it('parses JSON within the limits into plain values', () => {
    expect(parseUntrustedJson('{"a": [1, {"b": null}], "c": "d"}', { maxTokens: 100 })).to.deep.equal({ a: [1, { b: null }], c: 'd' });
    expect(parseUntrustedJson('42', { maxTokens: 0 })).to.equal(42);
  });

  it(`refuses nesting deeper than ${DEFAULT_MAX_JSON_DEPTH} levels by default, or than maxDepth`, () => {
    expect(parseUntrustedJson(nested(DEFAULT_MAX_JSON_DEPTH), { maxTokens: 1000 })).to.be.an('array');
    expect(refusal(nested(DEFAULT_MAX_JSON_DEPTH + 1), { maxTokens: 1000 })).to.equal(`is nested deeper than ${DEFAULT_MAX_JSON_DEPTH} levels`);
    // Depth, not count: as many arrays side by side are accepted.
    expect(parseUntrustedJson(`[${Array(200).fill('[]').join(',')}]`, { maxTokens: 1000 })).to.have.length(200);
    expect(refusal('{"a": {"b": [1]}}', { maxDepth: 2, maxTokens: 100 })).to.equal('is nested deeper than 2 levels');
  });

  it('refuses more than maxTokens arrays, objects and items, counting [, { and ,', () => {
    const limits = { maxTokens: 5 };
    // `[`, `{`, `,`, `[`, `,`: five.
    expect(parseUntrustedJson('[{"a": 1}, [2, 3]]', limits)).to.deep.equal([{ a: 1 }, [2, 3]]);
    expect(refusal('[{"a": 1}, [2, 3, 4]]', limits)).to.equal('has more than 5 arrays, objects and items (JSON tokens [, { and ,)');
    expect(refusal('[[],[],[]]', limits)).to.match(/^has more than 5 /);
    expect(parseUntrustedJson('{"a":1,"b":2,"c":3,"d":4,"e":5}', limits)).to.have.property('e');
    expect(refusal('{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6}', limits)).to.match(/^has more than 5 /);
  });

  it('counts nothing inside strings, escaped quotes and backslashes included', () => {
    // One `[` and three `,`.
    const limits = { maxDepth: 1, maxTokens: 4 };
    const text = JSON.stringify(['[[[{{{,,,', 'a "quoted [" word, {', 'ends in a backslash \\', '\\"[[[']);
    expect(parseUntrustedJson(text, limits)).to.have.length(4);
    // After a string closed by a quote that an escaped backslash precedes, brackets count again.
    expect(refusal('["a\\\\", [1]]', limits)).to.equal('is nested deeper than 1 levels');
  });

  it('refuses text that is not JSON, with the parser’s reason', () => {
    for (const text of ['', '{"a": ', 'hello', '["unterminated [[[', ']]][[[']) {
      expect(refusal(text, { maxTokens: 100 }), JSON.stringify(text)).to.match(/^is not JSON: /);
    }
  });

  it('refuses an 8 MiB body of nested or of side-by-side arrays before JSON.parse builds them', () => {
    // Parsed, the nested one took 460 MiB of RSS and 2 s of the event loop.
    const half = 4 * 2 ** 20;
    expect(refusal(nested(half), { maxTokens: 2 * 2 ** 20 })).to.equal(`is nested deeper than ${DEFAULT_MAX_JSON_DEPTH} levels`);
    expect(refusal(`[${'[],'.repeat(half * (2 / 3))}[]]`, { maxTokens: 2 * 2 ** 20 })).to.match(/^has more than 2097152 /);
  });
});

describe('checkUntrustedJson', () => {
  it('refuses past the same limits as parseUntrustedJson, and leaves whether it is JSON to the parser', () => {
    expect(() => checkUntrustedJson(nested(DEFAULT_MAX_JSON_DEPTH + 1), { maxTokens: 1000 })).to.throw(UntrustedJsonError, `is nested deeper than ${DEFAULT_MAX_JSON_DEPTH} levels`);
    expect(() => checkUntrustedJson('[[],[],[]]', { maxTokens: 5 })).to.throw(UntrustedJsonError, /^has more than 5 /);
    expect(checkUntrustedJson('[{"a": 1}, [2, 3]]', { maxTokens: 5 })).to.equal(undefined);
    expect(checkUntrustedJson('{"a": ', { maxTokens: 5 })).to.equal(undefined);
  });
});
