package journal

import "golang.org/x/sys/unix"

const populate = unix.MAP_POPULATE
