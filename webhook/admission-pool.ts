import { Worker, type ResourceLimits } from 'node:worker_threads';
import type { Answer } from '../provider/core/http-router.js';
import type { AdmissionWorkerData } from './admission-worker.js';
import type { ReviewJob, WorkerMessage } from './admission-worker-protocol.js';
import { denyUnfinished, type ReviewEnvelope, type ReviewReply } from './answer-review.js';

/** Why a review was answered without its worker's reply. */
export type AbandonReason = 'deadline' | 'worker_exit' | 'queue_full' | 'closed';

export interface AdmissionPoolOptions {
  /** Worker threads, each answering one review at a time; default 1. */
  workers?: number;
  /**
   * How long a review may take from its arrival (queueing included) before it is answered
   * without its worker: denied, and the worker that held it replaced. Default 2 s, well inside
   * the webhook's `timeoutSeconds` (5), so the user reads why rather than a timeout.
   */
  deadlineMs?: number;
  /** Reviews waiting for a worker, at most; default 1024. */
  maxQueued?: number;
  /** Characters of the reviews waiting for a worker, at most; default 64 Mi. */
  maxQueuedChars?: number;
  /** Heap of each worker; default 256 MiB of old generation. A worker past it dies and is replaced. */
  resourceLimits?: ResourceLimits;
  workerData?: AdmissionWorkerData;
  /** The worker's script; default `admission-worker` beside this module. Tests give their own. */
  workerUrl?: URL;
  /** Told about every review answered without its worker's reply. */
  onAbandoned?: (reason: AbandonReason, envelope: ReviewEnvelope | undefined) => void;
  /** Told about a worker that failed (its error, or its exit code), for the log. */
  onWorkerError?: (err: unknown) => void;
}

interface Job {
  id: number;
  raw: string;
  envelope?: ReviewEnvelope;
  resolve: (reply: ReviewReply) => void;
  timer: NodeJS.Timeout;
  slot?: Slot;
}

interface Slot {
  worker: Worker;
  job?: Job;
  /** The worker started (its script loaded): one that dies before is not replaced in a loop. */
  online: boolean;
}

export const DEFAULT_ADMISSION_DEADLINE_MS = 2000;

/**
 * Answers AdmissionReviews in worker threads, so that no review can hold the main event loop,
 * which renews the leader's Lease and serves the extender, the kubelet API and the probes. The
 * mutation is linear and its input bounded (`checkPodSize`); this is the guard against the next
 * slow path nobody has found yet, and against a body that is merely huge.
 *
 * * Each worker answers one review at a time; reviews wait in a FIFO queue bounded by count
 *   and characters. A review that finds the queue full is answered 503 at once (the apiserver
 *   then applies the webhook's failure policy), so a flood costs bounded memory.
 * * Every review has a deadline from its arrival. Past it, a queued review is answered 503; a
 *   review in a worker is denied with an AdmissionReview that says why (the worker told the
 *   pool the review's uid before mutating), and the worker is terminated and replaced: a
 *   thread stuck in a loop cannot be interrupted any other way.
 * * A worker that dies (out of heap, a crash) has its review answered the same way, and is
 *   replaced when the next review needs it.
 */
export class AdmissionPool {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private queuedChars = 0;
  private nextId = 1;
  private closed = false;
  private readonly size: number;
  private readonly deadlineMs: number;
  private readonly maxQueued: number;
  private readonly maxQueuedChars: number;

  constructor(private readonly opts: AdmissionPoolOptions = {}) {
    this.size = Math.max(1, Math.floor(opts.workers ?? 1));
    this.deadlineMs = opts.deadlineMs ?? DEFAULT_ADMISSION_DEADLINE_MS;
    this.maxQueued = opts.maxQueued ?? 1024;
    this.maxQueuedChars = opts.maxQueuedChars ?? 64 * 2 ** 20;
    // Warm from the start: loading a worker's modules takes a few hundred milliseconds, which
    // the first review should not spend out of its deadline.
    for (let i = 0; i < this.size; i++) this.spawn();
  }

  /** Answers one raw AdmissionReview body; never rejects. */
  review(raw: string): Promise<ReviewReply> {
    if (this.closed) return Promise.resolve(this.abandoned(undefined, 'closed'));
    if (this.queue.length >= this.maxQueued || this.queuedChars + raw.length > this.maxQueuedChars) {
      return Promise.resolve(this.abandoned(undefined, 'queue_full'));
    }
    return new Promise((resolve) => {
      const job: Job = { id: this.nextId++, raw, resolve, timer: undefined as unknown as NodeJS.Timeout };
      job.timer = setTimeout(() => this.expire(job), this.deadlineMs);
      this.queue.push(job);
      this.queuedChars += raw.length;
      this.dispatch();
    });
  }

  /** Workers alive now (for tests and the metrics). */
  get workers(): number {
    return this.slots.length;
  }

  /** Answers what is pending as abandoned and terminates the workers. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) this.finish(job, this.abandoned(undefined, 'closed'));
    this.queuedChars = 0;
    const slots = this.slots.splice(0);
    for (const slot of slots) if (slot.job) this.finish(slot.job, this.abandoned(slot.job.envelope, 'closed'));
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }

  private dispatch(): void {
    while (this.queue.length > 0) {
      let slot = this.slots.find((s) => !s.job);
      if (!slot && this.slots.length < this.size) slot = this.spawn();
      if (!slot) return;
      const job = this.queue.shift()!;
      this.queuedChars -= job.raw.length;
      job.slot = slot;
      slot.job = job;
      slot.worker.postMessage({ id: job.id, raw: job.raw } satisfies ReviewJob);
      job.raw = ''; // the worker has its own copy
    }
  }

  private spawn(): Slot {
    const url = this.opts.workerUrl ?? defaultWorkerUrl();
    const { script, evaluated } = workerScript(url);
    const worker = new Worker(script, {
      eval: evaluated,
      workerData: this.opts.workerData ?? {},
      resourceLimits: this.opts.resourceLimits ?? { maxOldGenerationSizeMb: 256 },
      // Its output is the main thread's: a worker logs nothing itself.
      stdout: false,
      stderr: false,
    });
    // A worker must not keep the process alive on its own: the servers do, and they close the pool.
    worker.unref();
    const slot: Slot = { worker, online: false };
    worker.on('online', () => (slot.online = true));
    worker.on('message', (msg: WorkerMessage) => {
      const job = slot.job;
      if (!job || job.id !== msg.id) return; // an answer to a review already abandoned
      if ('envelope' in msg) job.envelope = msg.envelope;
      else {
        slot.job = undefined;
        this.finish(job, msg.reply);
        this.dispatch();
      }
    });
    worker.on('error', (err) => this.opts.onWorkerError?.(err));
    worker.on('exit', (code) => {
      const i = this.slots.indexOf(slot);
      if (i < 0) return; // retired by the pool
      this.slots.splice(i, 1);
      this.opts.onWorkerError?.(new Error(`admission worker exited with code ${code}`));
      if (slot.job) this.finish(slot.job, this.abandoned(slot.job.envelope, 'worker_exit'));
      this.replace(slot);
    });
    this.slots.push(slot);
    return slot;
  }

  private expire(job: Job): void {
    const slot = job.slot;
    if (!slot) {
      const i = this.queue.indexOf(job);
      if (i >= 0) {
        this.queue.splice(i, 1);
        this.queuedChars -= job.raw.length;
      }
      this.finish(job, this.abandoned(undefined, 'deadline'));
      return;
    }
    // The worker is stuck on this review (or nearly done: it cannot be told apart). Retire it
    // first, so its exit is not taken for a crash, then answer.
    const i = this.slots.indexOf(slot);
    if (i >= 0) this.slots.splice(i, 1);
    slot.job = undefined;
    void slot.worker.terminate();
    this.finish(job, this.abandoned(job.envelope, 'deadline'));
    this.replace(slot);
  }

  /**
   * After a worker is gone: a warm replacement at once if it had started, so the next review
   * does not pay for loading one; otherwise (its script fails to load) only when a review
   * needs one, so a broken install does not spin.
   */
  private replace(gone: Slot): void {
    if (!this.closed && gone.online && this.slots.length < this.size) this.spawn();
    this.dispatch();
  }

  private finish(job: Job, reply: ReviewReply): void {
    clearTimeout(job.timer);
    job.resolve(reply);
  }

  private abandoned(envelope: ReviewEnvelope | undefined, reason: AbandonReason): ReviewReply {
    this.opts.onAbandoned?.(reason, envelope);
    const message = ABANDONED_MESSAGES[reason].replace('{deadline}', `${this.deadlineMs / 1000}s`);
    // With the review's uid, a proper denial; before it is known, all that is left is HTTP.
    const answer: Answer = envelope ? denyUnfinished(envelope, message) : { status: 503, text: message };
    return { answer, result: 'error', log: { level: 'warn', message: 'webhook: review abandoned', fields: { reason, uid: envelope?.uid } } };
  }
}

const ABANDONED_MESSAGES: Record<AbandonReason, string> = {
  deadline: 'admiralty webhook: the pod took longer than {deadline} to review, so it is refused (is it unusually large?); nothing was created',
  worker_exit: 'admiralty webhook: the review failed (its admission worker stopped, perhaps out of memory on an unusually large pod); nothing was created',
  queue_full: 'admiralty webhook: too many reviews are waiting; retry later',
  closed: 'admiralty webhook: the provider is shutting down; retry later',
};

/** `admission-worker` beside this module: .ts from the sources (tsx), .js from dist/ and from the bundle's chunks. */
function defaultWorkerUrl(): URL {
  const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
  return new URL(`./admission-worker.${ext}`, import.meta.url);
}

/**
 * What `new Worker` runs: the script itself, or, for a TypeScript worker (the sources, as tests
 * and benchmarks run them), a bootstrap that registers tsx's loader in the thread first: the
 * loader that `tsx` or `--import tsx` registers in the main thread does not reach a worker.
 */
function workerScript(url: URL): { script: URL | string; evaluated: boolean } {
  if (!url.pathname.endsWith('.ts')) return { script: url, evaluated: false };
  return { script: `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(url.href)}); });`, evaluated: true };
}
