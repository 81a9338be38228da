import net from 'node:net';
import tls from 'node:tls';
import { once } from 'node:events';

// The child half of flood-client.ts: see there.
process.once('message', (m: { port: number; tls: boolean; preamble: string; unit: string; totalBytes: number; stallMs: number; pieceBytes?: number }) => {
  void (async () => {
    const socket: net.Socket = m.tls ? tls.connect({ port: m.port, host: '127.0.0.1', rejectUnauthorized: false }) : net.connect(m.port, '127.0.0.1');
    await once(socket, m.tls ? 'secureConnect' : 'connect');
    socket.on('error', () => undefined);
    socket.pause(); // never read
    const unit = Buffer.from(m.unit, 'base64');
    if (m.pieceBytes) {
      // Trickle: `unit` once, one write per piece, each its own TCP segment when it can be.
      socket.setNoDelay(true);
      const preamble = Buffer.from(m.preamble, 'base64');
      if (preamble.length > 0) socket.write(preamble);
      await new Promise((r) => setTimeout(r, 100));
      for (let off = 0; off < unit.length && !socket.destroyed; off += m.pieceBytes) {
        if (!socket.write(unit.subarray(off, off + m.pieceBytes))) await once(socket, 'drain');
        if (off % (64 * m.pieceBytes) === 0) await new Promise((r) => setImmediate(r));
      }
      process.send!({ sentBytes: unit.length });
      return;
    }
    const batch = Buffer.concat(Array.from({ length: Math.max(1, Math.ceil(65536 / unit.length)) }, () => unit));
    let sent = 0;
    const preamble = Buffer.from(m.preamble, 'base64');
    if (preamble.length > 0) socket.write(preamble);
    while (sent < m.totalBytes && !socket.destroyed) {
      sent += batch.length;
      if (!socket.write(batch)) {
        const ac = new AbortController();
        let timer: NodeJS.Timeout | undefined;
        const drained = await Promise.race([
          once(socket, 'drain', { signal: ac.signal }).then(
            () => true,
            () => false,
          ),
          once(socket, 'close', { signal: ac.signal }).then(
            () => false,
            () => false,
          ),
          new Promise<boolean>((r) => (timer = setTimeout(() => r(false), m.stallMs))),
        ]);
        ac.abort(); // drop the losers' listeners
        clearTimeout(timer);
        if (!drained) {
          sent -= socket.writableLength;
          break;
        }
      }
    }
    process.send!({ sentBytes: sent });
  })();
});
