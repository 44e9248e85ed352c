"""An affine transform of a (sparse) feature matrix, used as a solver's rows without forming it.

After private standardisation a solver's rows are ``u_i = [f_i (x_i A - b), v]``:
a released affine map ``x -> x A - b`` of the raw row (centring, scaling and
possibly whitening), an optional per-row factor ``f_i <= 1`` (clipping to a
released norm) and a constant intercept column of value ``v``. For a dense
``X`` the pipeline simply forms these rows. For a sparse ``X`` (the output of
``OneHotEncoder``) centring would make them dense, so :class:`LinearDesign`
keeps ``X`` sparse and offers what the solvers use: products with vectors,
row subsets, row norms and second-moment matrices (computed on dense blocks of
rows).
"""

import numpy as np
import scipy.sparse as sp

__all__ = ["LinearDesign"]

_CHUNK = 4096


class LinearDesign:
    """Rows ``u_i = [f_i (x_i A - b), v]`` of a sparse ``X``, never formed as a dense matrix.

    Parameters
    ----------
    X : sparse matrix of shape (n_samples, n_features)
    A : ndarray of shape (n_features, n_features) or (n_features,)
        The linear part (a vector stands for a diagonal matrix).
    b : ndarray of shape (n_features,)
    intercept_value : float or None
        Value of the appended constant column (None: no column).
    factors : ndarray of shape (n_samples,) or None
        Per-row factors of the feature part (None: all 1).

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from skdp.solvers.design import LinearDesign
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]]))
    >>> D = LinearDesign(X, A=np.array([1.0, 0.5]), b=np.array([1.0, 0.0]), intercept_value=1.0)
    >>> D.toarray().tolist()
    [[0.0, 0.0, 1.0], [-1.0, 1.0, 1.0], [2.0, 0.0, 1.0]]
    >>> (D @ np.array([1.0, 1.0, 1.0])).tolist(), (D.T @ np.ones(3)).tolist()
    ([1.0, 1.0, 3.0], [1.0, 1.0, 3.0])
    """

    def __init__(self, X, A, b, intercept_value=None, factors=None):
        self.X = sp.csr_matrix(X, dtype=float)
        self.A = np.asarray(A, dtype=float)
        self.b = np.asarray(b, dtype=float)
        self.intercept_value = None if intercept_value is None else float(intercept_value)
        self.factors = None if factors is None else np.asarray(factors, dtype=float)
        n, d = self.X.shape
        self.shape = (n, d + (self.intercept_value is not None))

    @property
    def n_features(self):
        return self.X.shape[1]

    def _linear(self, w):
        return self.A * w if self.A.ndim == 1 else self.A @ w

    def _linear_t(self, g):
        return self.A * g if self.A.ndim == 1 else self.A.T @ g

    def __matmul__(self, w):
        w = np.asarray(w, dtype=float)
        d = self.n_features
        out = self.X @ self._linear(w[:d]) - self.b @ w[:d]
        if self.factors is not None:
            out = out * self.factors
        if self.intercept_value is not None:
            out = out + self.intercept_value * w[d]
        return np.asarray(out).ravel()

    def rmatvec(self, v):
        """``U^T v``."""
        v = np.asarray(v, dtype=float)
        fv = v if self.factors is None else v * self.factors
        feat = self._linear_t(np.asarray(self.X.T @ fv).ravel()) - self.b * fv.sum()
        if self.intercept_value is None:
            return feat
        return np.append(feat, self.intercept_value * v.sum())

    @property
    def T(self):
        return _Adjoint(self)

    def __getitem__(self, rows):
        if isinstance(rows, (int, np.integer)):
            return self.dense_rows(np.array([rows]))[0]
        rows = np.arange(self.shape[0])[rows]
        return LinearDesign(self.X[rows], self.A, self.b, self.intercept_value,
                            None if self.factors is None else self.factors[rows])

    def with_factors(self, factors):
        """The same design with per-row factors on the feature part."""
        return LinearDesign(self.X, self.A, self.b, self.intercept_value, factors)

    def dense_rows(self, rows=None):
        """Dense rows (all of them, or the given index array)."""
        X = self.X if rows is None else self.X[rows]
        f = self.factors if (self.factors is None or rows is None) else self.factors[rows]
        Z = X.toarray()
        Z = (Z * self.A if self.A.ndim == 1 else Z @ self.A) - self.b
        if f is not None:
            Z = Z * f[:, None]
        if self.intercept_value is not None:
            Z = np.hstack([Z, np.full((Z.shape[0], 1), self.intercept_value)])
        return Z

    def blocks(self, chunk=_CHUNK):
        """Dense blocks of consecutive rows."""
        for i0 in range(0, self.shape[0], chunk):
            yield self.dense_rows(np.arange(i0, min(i0 + chunk, self.shape[0])))

    def toarray(self):
        return np.vstack(list(self.blocks())) if self.shape[0] else np.zeros(self.shape)

    def row_norms(self):
        return np.concatenate([np.sqrt(np.einsum("ij,ij->i", B, B)) for B in self.blocks()])

    def weighted_gram(self, weights=None):
        """``sum_i w_i u_i u_i^T`` (``w = 1`` by default)."""
        p = self.shape[1]
        G = np.zeros((p, p))
        start = 0
        for B in self.blocks():
            w = 1.0 if weights is None else weights[start:start + B.shape[0]][:, None]
            G += B.T @ (B * w)
            start += B.shape[0]
        return G


class _Adjoint:
    def __init__(self, design):
        self.design = design

    def __matmul__(self, v):
        return self.design.rmatvec(v)
