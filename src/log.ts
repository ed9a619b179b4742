import pino from 'pino';

export type Logger = pino.Logger;

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** JSON lines on stdout; one line per meaningful event, never per resource at info. */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: 'xdstp-relay' } });
}
