package journal

const populate = 0
