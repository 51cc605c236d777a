// The scheduler's log output when nobody reads it (SPEC §6 "Stop"): a reader that stalls (a
// stopped pager, a full pipe, a hung log shipper) must neither grow the scheduler's memory
// without bound nor keep it from exiting. Node queues writes to a pipe in memory, so past a cap
// lines are dropped (and counted, and said once the reader catches up), and at exit the queue is
// given a bounded time to drain.

/** Queued output beyond which lines are dropped. */
const QUEUE_CAP_BYTES = 1024 * 1024;

export interface LineSink {
  (line: string): void;
  /** Waits until the queued output is written, at most `limitMs`. */
  flush(limitMs: number): Promise<void>;
}

export function boundedLines(stream: NodeJS.WriteStream, capBytes = QUEUE_CAP_BYTES): LineSink {
  let dropped = 0;
  let waiting = false;
  const write = (text: string): void => {
    try {
      stream.write(text);
    } catch {
      // a closed stream: the log is for people, the records have the results
    }
  };
  const onDrain = (): void => {
    waiting = false;
    if (dropped === 0) return;
    const n = dropped;
    dropped = 0;
    write(`routinely: ${n} log line${n === 1 ? '' : 's'} dropped while this output was not read\n`);
  };
  const sink = ((line: string): void => {
    if (stream.destroyed || !stream.writable) return;
    if (stream.writableLength > capBytes) {
      dropped++;
      if (!waiting) {
        waiting = true;
        stream.once('drain', onDrain);
      }
      return;
    }
    write(`${line}\n`);
  }) as LineSink;
  sink.flush = (limitMs) =>
    new Promise<void>((resolve) => {
      if (stream.destroyed || !stream.writable || stream.writableLength === 0) return resolve();
      const timer = setTimeout(done, limitMs);
      timer.unref();
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      stream.write('', done);
    });
  return sink;
}
