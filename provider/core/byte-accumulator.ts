/** Pieces shorter than this are copied into a block rather than held as they came. */
const SMALL_PIECE_BYTES = 4 * 1024;
/** The block small pieces are gathered in before they are held as one. */
const BLOCK_BYTES = 64 * 1024;

/**
 * Bytes that arrive in pieces and are wanted whole, held in memory close to their length
 * whatever the size of the pieces. A peer that sends one byte per TLS record or per HTTP/2 DATA
 * frame gets each byte handed on as a Buffer of its own, which costs a hundred bytes and more
 * of heap: a bound counted in bytes would hold a hundred times its size in such pieces. Here the
 * first piece is held as it came (an answer in one frame, the common case, costs no block and
 * no copy); after it, a piece of less than {@link SMALL_PIECE_BYTES} is copied into a block, and
 * the block is held as one piece when it is full or a larger piece follows; a larger piece is
 * held as it came.
 */
export class ByteAccumulator {
  private readonly pieces: Buffer[] = [];
  private block?: Buffer;
  private used = 0;
  private total = 0;

  /** Bytes held. */
  get length(): number {
    return this.total;
  }

  push(piece: Buffer): void {
    if (piece.length === 0) return;
    this.total += piece.length;
    if (piece.length >= SMALL_PIECE_BYTES || this.total === piece.length) {
      this.seal();
      this.pieces.push(piece);
      return;
    }
    if (this.block && this.used + piece.length > this.block.length) this.seal();
    this.block ??= Buffer.allocUnsafe(BLOCK_BYTES);
    piece.copy(this.block, this.used);
    this.used += piece.length;
  }

  /** Every byte held, in order, as one Buffer; the accumulator is then empty. */
  take(): Buffer {
    this.seal();
    const only = this.pieces.length === 1 ? this.pieces[0] : undefined;
    const whole = only ?? Buffer.concat(this.pieces, this.total);
    this.pieces.length = 0;
    this.total = 0;
    return whole;
  }

  /** Holds what the block gathered as a piece of its exact size, and keeps the block for more. */
  private seal(): void {
    if (!this.block || this.used === 0) return;
    this.pieces.push(Buffer.from(this.block.subarray(0, this.used)));
    this.used = 0;
  }
}
