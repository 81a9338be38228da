import { expect } from 'chai';
import { CertRotator } from '../../../certs/cert-rotator.js';
import { createSelfSignedServingCert } from '../../../certs/create-self-signed-serving-cert.js';
import { readCertificate } from '../../../certs/read-certificate.js';
import type { CertKeyPair } from '../../../certs/cert-types.js';
import { FakeClock } from '../../../provider/core/clock.js';

const HOUR_MS = 60 * 60 * 1000;
const DAY_MS = 24 * HOUR_MS;
const START = Date.UTC(2030, 0, 1);

/** Lets the promise chains started by fired timers run to completion. */
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('certs: CertRotator', () => {
  let clock: FakeClock;
  let issuedAt: number[];
  let rotated: CertKeyPair[];
  let errors: number;
  let failNext: number;
  let validityDays: number;

  const issue = async (): Promise<CertKeyPair> => {
    issuedAt.push(clock.now());
    if (failNext > 0) {
      failNext--;
      throw new Error('signer unavailable');
    }
    return createSelfSignedServingCert({ commonName: 'w', dnsNames: ['w.svc'], validityDays, now: clock.now() });
  };

  const makeRotator = (extra: Partial<ConstructorParameters<typeof CertRotator>[0]> = {}) =>
    new CertRotator({
      issue,
      clock,
      onRotate: (pair) => {
        rotated.push(pair);
      },
      onError: () => {
        errors++;
      },
      ...extra,
    });

  beforeEach(() => {
    clock = new FakeClock(START);
    issuedAt = [];
    rotated = [];
    errors = 0;
    failNext = 0;
    validityDays = 3;
  });

  it('issues on start and renews once 2/3 of the lifetime has elapsed', async () => {
    const rotator = makeRotator();
    await rotator.start();
    expect(rotated).to.have.length(1);
    const info = readCertificate(rotated[0]!.certPem);
    const dueAt = info.notBefore.getTime() + Math.floor((info.notAfter.getTime() - info.notBefore.getTime()) * (2 / 3));
    clock.advance(dueAt - clock.now() - 1);
    await flush();
    expect(issuedAt).to.have.length(1);
    clock.advance(1);
    await flush();
    expect(issuedAt).to.deep.equal([START, dueAt]);
    expect(rotated).to.have.length(2);
    expect(rotator.currentPair).to.equal(rotated[1]);
    expect(readCertificate(rotated[1]!.certPem).serialHex).to.not.equal(info.serialHex);
    rotator.stop();
  });

  it('honours a fixed renewBeforeMs margin and a pair given to start', async () => {
    const served = await issue();
    issuedAt = [];
    const rotator = makeRotator({ renewBeforeMs: 12 * HOUR_MS });
    await rotator.start(served);
    expect(rotated).to.have.length(0);
    const notAfter = readCertificate(served.certPem).notAfter.getTime();
    clock.advance(notAfter - 12 * HOUR_MS - clock.now() - 1);
    await flush();
    expect(issuedAt).to.have.length(0);
    clock.advance(1);
    await flush();
    expect(issuedAt).to.deep.equal([notAfter - 12 * HOUR_MS]);
    expect(rotated).to.have.length(1);
    rotator.stop();
  });

  it('with recheckMs, calls issue that often between renewals and still renews on time', async () => {
    const served = await issue();
    issuedAt = [];
    const rotator = makeRotator({ recheckMs: HOUR_MS });
    await rotator.start(served);
    clock.advance(HOUR_MS - 1);
    await flush();
    expect(issuedAt).to.have.length(0);
    clock.advance(1);
    await flush();
    expect(issuedAt).to.deep.equal([START + HOUR_MS]);
    clock.advance(HOUR_MS);
    await flush();
    expect(issuedAt).to.deep.equal([START + HOUR_MS, START + 2 * HOUR_MS]);
    // Each issue returned a fresh pair in this test; the next renewal of the last one is still
    // 2 days away, and the rechecks keep their hourly pace.
    clock.advance(HOUR_MS / 2);
    await flush();
    expect(issuedAt).to.have.length(2);
    expect(rotated).to.have.length(2);
    rotator.stop();
  });

  it('reaches a renewal months away in several timer hops (no 32-bit timer overflow)', async () => {
    validityDays = 365;
    const rotator = makeRotator();
    await rotator.start();
    clock.advance(30 * DAY_MS);
    await flush();
    expect(issuedAt).to.have.length(1);
    clock.advance(200 * DAY_MS);
    await flush();
    expect(issuedAt).to.have.length(1);
    clock.advance(50 * DAY_MS);
    await flush();
    expect(issuedAt).to.have.length(2);
    const info = readCertificate(rotated[0]!.certPem);
    const dueAt = info.notBefore.getTime() + Math.floor((info.notAfter.getTime() - info.notBefore.getTime()) * (2 / 3));
    expect(issuedAt[1]).to.equal(dueAt);
    rotator.stop();
  });

  it('retries failures with doubling backoff and resets after success', async () => {
    const rotator = makeRotator({ retryInitialMs: 1000, retryMaxMs: 3000 });
    failNext = 3;
    let firstError: unknown;
    await rotator.start().catch((err) => (firstError = err));
    expect((firstError as Error).message).to.equal('signer unavailable');
    for (let i = 0; i < 4; i++) {
      clock.advance(500);
      await flush();
    }
    // Retries at +1 s and +3 s (1 s, then 2 s); the 3rd retry waits 3 s (capped).
    expect(issuedAt.map((t) => t - START)).to.deep.equal([0, 1000]);
    // Stop exactly at the retry so that its failure is observed then (backoff counts from it).
    clock.advance(1000);
    await flush();
    expect(issuedAt.map((t) => t - START)).to.deep.equal([0, 1000, 3000]);
    clock.advance(2999);
    await flush();
    expect(issuedAt).to.have.length(3);
    clock.advance(1);
    await flush();
    expect(issuedAt.map((t) => t - START)).to.deep.equal([0, 1000, 3000, 6000]);
    expect(errors).to.equal(3);
    expect(rotated).to.have.length(1);
    // Back to the normal schedule: exactly one timer, far away.
    expect(clock.pending()).to.equal(1);
    clock.advance(DAY_MS);
    await flush();
    expect(issuedAt).to.have.length(4);
    rotator.stop();
  });

  it('treats an issued pair that is already due as a failure instead of spinning', async () => {
    const stale = createSelfSignedServingCert({ commonName: 'w', dnsNames: ['w.svc'], validityDays: 1, now: START - 2 * DAY_MS });
    const rotator = new CertRotator({ issue: async () => stale, clock, onRotate: (p) => void rotated.push(p), onError: () => void errors++, retryInitialMs: 1000 });
    await rotator.start().then(
      () => expect.fail('should reject'),
      (err: Error) => expect(err.message).to.match(/already due/),
    );
    expect(rotated).to.have.length(0);
    expect(errors).to.equal(1);
    expect(clock.pending()).to.equal(1);
    rotator.stop();
    expect(clock.pending()).to.equal(0);
  });

  it('rotateNow forces a renewal, joins a running attempt, and stop cancels the schedule', async () => {
    const rotator = makeRotator();
    await rotator.start();
    const a = rotator.rotateNow();
    const b = rotator.rotateNow();
    expect(a).to.equal(b);
    await a;
    expect(issuedAt).to.have.length(2);
    expect(rotated).to.have.length(2);
    expect(clock.pending()).to.equal(1);
    rotator.stop();
    expect(clock.pending()).to.equal(0);
    clock.advance(10 * DAY_MS);
    await flush();
    expect(issuedAt).to.have.length(2);
  });
});
