"""Vocabulary every stage shares: the input-error type (`errors`), a trial's outcome and result
(`result`), the names stages must agree on (`names`: trial-dir files, trial env vars, units), the
failure texts a log is classified by (`patterns`) and the values of a discrete distribution
(`distributions`).

May import: nothing of verlsweep. Every other subpackage may import it.
"""
