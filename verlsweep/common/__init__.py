"""Vocabulary every stage shares: the input-error type (`errors`), a trial's outcome and result
(`result`), and the names stages must agree on (`names`: trial-dir files, trial env vars, units).

May import: nothing of verlsweep. Every other subpackage may import it.
"""
