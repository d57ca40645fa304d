module cdnorigin

go 1.26
