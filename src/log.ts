import pino from 'pino';

export type Logger = pino.Logger;

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export function isLogLevel(level: unknown): level is LogLevel {
  return typeof level === 'string' && (LOG_LEVELS as readonly string[]).includes(level);
}

/**
 * Children of each logger made by createLogger, so a run-time level change
 * reaches them too (a pino child keeps the level it was born with). Weak, so a
 * short-lived child is not kept alive by this bookkeeping.
 */
const childrenOf = new WeakMap<Logger, Set<WeakRef<Logger>>>();

/** JSON lines on stdout (or `destination`); one line per meaningful event, never per resource at info. */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  const children = new Set<WeakRef<Logger>>();
  const options: pino.LoggerOptions = {
    level,
    base: { service: 'xdstp-relay' },
    // Inherited by children, so grandchildren are tracked as well.
    onChild: (child) => {
      if (children.size >= 1024) for (const ref of children) if (!ref.deref()) children.delete(ref);
      children.add(new WeakRef(child));
    },
  };
  const logger = destination ? pino(options, destination) : pino(options);
  childrenOf.set(logger, children);
  return logger;
}

/** Changes the level of `logger` and of every child made from it since; returns the previous level. */
export function setLogLevel(logger: Logger, level: LogLevel): string {
  const previous = logger.level;
  logger.level = level;
  const children = childrenOf.get(logger);
  if (children) {
    for (const ref of children) {
      const child = ref.deref();
      if (child) child.level = level;
      else children.delete(ref);
    }
  }
  return previous;
}
