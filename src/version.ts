// The package version, set by the build (scripts/build.mjs defines __ROUTINELY_VERSION__).

declare const __ROUTINELY_VERSION__: string | undefined;
export const VERSION = typeof __ROUTINELY_VERSION__ === 'string' ? __ROUTINELY_VERSION__ : '0.0.0-dev';
