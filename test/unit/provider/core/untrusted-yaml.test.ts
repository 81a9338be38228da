import { expect } from 'chai';
import { parseUntrustedYaml, UntrustedYamlError } from '../../../../provider/core/untrusted-yaml.js';

const LIMITS = { maxBytes: 256 * 1024 };

function refusal(text: string, limits = LIMITS): string {
  try {
    parseUntrustedYaml(text, limits);
  } catch (err) {
    expect(err).to.be.instanceOf(UntrustedYamlError);
    return (err as Error).message;
  }
  expect.fail('the text was accepted');
}

describe('parseUntrustedYaml', () => {
  it('parses plain YAML and JSON into plain values', () => {
    expect(parseUntrustedYaml('a: 1\nb: [x, {c: d}]\n', LIMITS)).to.deep.equal({ a: 1, b: ['x', { c: 'd' }] });
    expect(parseUntrustedYaml('{"a": [1, 2]}', LIMITS)).to.deep.equal({ a: [1, 2] });
    expect(parseUntrustedYaml('', LIMITS)).to.equal(null);
  });

  it('refuses duplicate keys, nested ones too, and complex keys', () => {
    expect(refusal('a: 1\na: 2\n')).to.equal('not valid YAML: duplicate key "a"');
    expect(refusal('x: {y: 1, z: {q: 1, q: 2}}')).to.equal('not valid YAML: duplicate key "q"');
    expect(refusal('? [a, b]\n: 1\n')).to.match(/mapping keys must be plain scalars/);
  });

  it("checks a 250 KB flow mapping's duplicates with a Set, not with the library's pairwise check", function () {
    // The library's own check compares every key with every other: about 16 s for this text,
    // past this test's timeout, which is there for that hang and asserts no speed. The refusal
    // of the last key is in our words: the library's check, had it run, would have refused the
    // text first with its own ("Map keys must be unique").
    this.timeout(8000);
    const keys = Array.from({ length: 24_000 }, (_, i) => `k${i}: v`).join(', ');
    const text = `m: {${keys}}`;
    expect(Buffer.byteLength(text)).to.be.above(200_000);
    const parsed = parseUntrustedYaml(text, LIMITS) as { m: Record<string, string> };
    expect(Object.keys(parsed.m)).to.have.length(24_000);
    expect(refusal(`m: {${keys}, k0: again}`)).to.equal('not valid YAML: duplicate key "k0"');
  });

  it('refuses deep nesting before the parser recurses into it', () => {
    // The messages are the nesting scan's, which runs before the parser: the parser itself
    // would recurse 100 000 levels (or give its own error). A hang shows as the test's timeout.
    expect(refusal(`${'['.repeat(100_000)}${']'.repeat(100_000)}`)).to.equal('nested deeper than 32 levels');
    expect(refusal(`a: ${'{a: '.repeat(33)}1${'}'.repeat(33)}`)).to.equal('nested deeper than 32 levels');
    const block = Array.from({ length: 40 }, (_, i) => `${'  '.repeat(i)}a:`).join('\n');
    expect(refusal(block)).to.equal('indented deeper than 64 columns (block indicators such as "- " count)');
    expect(parseUntrustedYaml(`${'['.repeat(32)}${']'.repeat(32)}`, LIMITS)).to.be.an('array');
  });

  it('counts block indicators at the start of a line as nesting: "- - - x" needs no indentation', () => {
    // Each of these, a few KB long, nests thousands of block collections on one line: the parser
    // runs out of stack on the first parse, and the second parse of the same text aborted the
    // whole process (V8's RegExp compiler, out of memory) before the check counted indicators.
    for (const text of [`${'- '.repeat(3000)}x`, `${'? '.repeat(3000)}x`, `${'- ? '.repeat(1500)}x`, `${'-\t'.repeat(3000)}x`, `\t${'- '.repeat(3000)}x`, `a:\n  b:\n${' '.repeat(60)}- - - x`]) {
      expect(refusal(text), JSON.stringify(text.slice(0, 12))).to.match(/^indented deeper than 64 columns/);
    }
    // Up to the limit, and dashes that are content, still parse.
    expect(parseUntrustedYaml(`${'- '.repeat(32)}x`, LIMITS)).to.be.an('array');
    expect(parseUntrustedYaml(`k: |\n  ${'-'.repeat(200)}\n`, LIMITS)).to.deep.equal({ k: `${'-'.repeat(200)}\n` });
    expect(parseUntrustedYaml(`- -1\n- -x\n`, LIMITS)).to.deep.equal([-1, '-x']);
  });

  it('refuses an alias bomb and text over the size limit', () => {
    const bomb = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i < 9; i++)
      bomb.push(
        `${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(10)
          .fill(`*${String.fromCharCode(96 + i)}`)
          .join(', ')}]`,
      );
    expect(refusal(bomb.join('\n'))).to.match(/^not valid YAML: .*alias/i);
    expect(refusal('a: b\n', { maxBytes: 3 })).to.equal('larger than 3 bytes (5 bytes)');
  });

  it('reports syntax errors on one line, without a code frame of the text', () => {
    const message = refusal('a: [1, 2\nb: secret-value: x');
    expect(message).to.match(/^not valid YAML: /);
    expect(message).to.not.contain('\n');
  });
});
