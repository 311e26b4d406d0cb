// The one source file of floodgate_pch and floodgate_test_pch (cmake/pch.cmake): libraries
// with nothing of their own, which exist to build the precompiled header other targets reuse.
