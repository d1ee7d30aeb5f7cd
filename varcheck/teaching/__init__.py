"""The teaching family: explain, softmax, derive, their tables and figures."""
