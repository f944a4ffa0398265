#!/usr/bin/env bash
# Install headless Chromium (Debian's package) when it is missing: the offline-rendering test
# (tests/docs/test_offline_render.py) screenshots the docs site and the service's /docs with it.
set -u
for name in chromium chromium-browser; do
  command -v "$name" >/dev/null 2>&1 && exit 0
done
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "ensure-chromium: installing chromium (apt-get)" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/tmp/mgmatch-chromium-install.log 2>&1 \
    && exit 0
  echo "ensure-chromium: apt-get install chromium failed (see /tmp/mgmatch-chromium-install.log); the rendering test will be skipped" >&2
  exit 0
fi
echo "ensure-chromium: no chromium and no root apt-get; the rendering test will be skipped" >&2
exit 0
